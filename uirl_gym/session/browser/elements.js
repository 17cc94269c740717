// The page's elements, for the text observations and the actions by element (issue 41).
// Evaluated in the top frame's main world as one object, kept on the window under a
// symbol (invisible to the page's own names): window[Symbol.for("uirl.elements")].
//
// mark(episode, props): every element of every same-origin frame gets a `bid` attribute,
//   BrowserGym's way (kept while the element lives; iframes "a".."z", "aA"...; an
//   element's bid is its frame's letters and a number), counters starting afresh for
//   each episode; returns the focused element's bid, and with `props` each element's
//   box in screen pixels, visible fraction and set-of-marks membership, computed at once
//   (frames are drawn on demand: an IntersectionObserver would never report).
// target(bid, scroll): the screen point to act on an element at (the centre of its
//   visible part, scrolled into view first when it is not wholly visible), or why not.
// fill / select / focus (bid, ...): what an element action does inside the page.
(() => {
  const KEY = Symbol.for("uirl.elements");
  if (window[KEY]) return true;
  const SOM_TAGS = new Set(["INPUT", "TEXTAREA", "SELECT", "BUTTON", "A", "IFRAME", "VIDEO",
                            "LI", "TD", "OPTION"]);
  const state = { episode: null, elements: 0, frames: 0, byBid: new Map() };

  function frameLetters(n) {
    let s = String.fromCharCode(97 + (n % 26));
    for (n = Math.floor(n / 26); n > 0; n = Math.floor((n - 1) / 26)) {
      s += String.fromCharCode(65 + ((n - 1) % 26));
    }
    return s;
  }

  // Every element of a document (or shadow root), open shadow roots' after their host.
  function elementsOf(root, out) {
    for (const el of root.querySelectorAll("*")) {
      out.push(el);
      if (el.shadowRoot) elementsOf(el.shadowRoot, out);
    }
    return out;
  }

  // The same-origin documents of the page, each with its iframe, top first.
  function documents() {
    const docs = [];
    const visit = (doc, frame) => {
      docs.push({ doc, frame });
      for (const el of elementsOf(doc, [])) {
        if (el.tagName !== "IFRAME" && el.tagName !== "FRAME") continue;
        let child = null;
        try { child = el.contentDocument; } catch (e) { child = null; }
        if (child) visit(child, el);
      }
    };
    visit(document, null);
    return docs;
  }

  function forget() {
    for (const { doc } of documents()) {
      for (const el of elementsOf(doc, [])) if (el.hasAttribute("bid")) el.removeAttribute("bid");
    }
    state.elements = 0;
    state.frames = 0;
    state.byBid = new Map();
  }

  // Where a frame's content starts in top-frame layout pixels, and what of it shows.
  function frameGeometry(frameEl, cache) {
    if (cache.has(frameEl)) return cache.get(frameEl);
    if (!frameEl) {
      const top = { dx: 0, dy: 0, clip: [0, 0, window.innerWidth, window.innerHeight] };
      cache.set(null, top);
      return top;
    }
    const ownerWin = frameEl.ownerDocument.defaultView;
    const parent = frameGeometry(ownerWin.frameElement, cache);
    const r = frameEl.getBoundingClientRect();
    const cs = ownerWin.getComputedStyle(frameEl);
    const dx = parent.dx + r.left + frameEl.clientLeft + parseFloat(cs.paddingLeft || 0);
    const dy = parent.dy + r.top + frameEl.clientTop + parseFloat(cs.paddingTop || 0);
    const inner = [dx, dy, dx + frameEl.clientWidth, dy + frameEl.clientHeight];
    const geometry = { dx, dy, clip: intersect(parent.clip, inner) };
    cache.set(frameEl, geometry);
    return geometry;
  }

  function intersect(a, b) {
    return [Math.max(a[0], b[0]), Math.max(a[1], b[1]), Math.min(a[2], b[2]), Math.min(a[3], b[3])];
  }

  const area = (r) => Math.max(0, r[2] - r[0]) * Math.max(0, r[3] - r[1]);

  // The part of the frame's layout viewport an element may show in: clipped by every
  // ancestor whose overflow is not visible (a scrolled sheet's rows below its fold).
  function clipOf(el, base, cache, dx, dy) {
    const parent = el.parentElement || (el.parentNode && el.parentNode.host) || null;
    if (!parent) return base;
    if (cache.has(parent)) return cache.get(parent);
    let clip = clipOf(parent, base, cache, dx, dy);
    const style = parent.ownerDocument.defaultView.getComputedStyle(parent);
    if (style.overflowX !== "visible" || style.overflowY !== "visible") {
      const r = parent.getBoundingClientRect();
      clip = intersect(clip, [r.left + dx, r.top + dy, r.right + dx, r.bottom + dy]);
    }
    cache.set(parent, clip);
    return clip;
  }

  // Layout pixels -> screen pixels (pinch zoom): read once per pass.
  function screenTransform() {
    const vv = window.visualViewport;
    return vv ? { x: vv.offsetLeft, y: vv.offsetTop, scale: vv.scale } : { x: 0, y: 0, scale: 1 };
  }

  const toScreen = (t, x, y) => [(x - t.x) * t.scale, (y - t.y) * t.scale];

  const round2 = (v) => Math.round(v * 100) / 100;

  // What an element shows: its box and visible rectangle in top-frame layout pixels.
  // (None: no box at all, display: none. An element with no client rects has an empty
  // bounding box, so the rects are asked for only when the bounding box is empty; and
  // whether it is drawn only when some of its box is inside its clip: either way an
  // element outside it shows nothing. The cheap questions first: a pass over a page of
  // a thousand elements asks them a thousand times.)
  function geometry(el, frame, clips, frames) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0 && r.left === 0 && r.top === 0 &&
        el.getClientRects().length === 0) return null;
    const g = frameGeometry(frame, frames);
    const box = [r.left + g.dx, r.top + g.dy, r.right + g.dx, r.bottom + g.dy];
    let shown = intersect(box, clipOf(el, g.clip, clips, g.dx, g.dy));
    if (area(shown) > 0 && el.checkVisibility &&
        !el.checkVisibility({ opacityProperty: true, visibilityProperty: true })) {
      shown = [0, 0, 0, 0];
    }
    return { box, shown, dx: g.dx, dy: g.dy };
  }

  function hitsItself(el, doc, x, y) {
    let hit = doc.elementFromPoint(x, y);
    while (hit && hit.shadowRoot) {
      const inner = hit.shadowRoot.elementFromPoint(x, y);
      if (!inner || inner === hit) break;
      hit = inner;
    }
    for (let n = hit; n; n = n.parentNode || n.host) if (n === el) return { ok: true, hit };
    return { ok: false, hit };
  }

  function describe(el) {
    if (!el) return "nothing";
    let s = "<" + el.tagName.toLowerCase();
    if (el.id) s += ` id="${el.id}"`;
    const cls = typeof el.className === "string" ? el.className.trim() : "";
    if (cls) s += ` class="${cls.slice(0, 40)}"`;
    const bid = el.getAttribute && el.getAttribute("bid");
    if (bid) s += ` bid="${bid}"`;
    return s + ">";
  }

  function pointerish(el) {
    if (SOM_TAGS.has(el.tagName) || el.onclick != null) return true;
    return el.ownerDocument.defaultView.getComputedStyle(el).cursor === "pointer";
  }

  const BUTTONISH = (el) => el.tagName === "BUTTON" || el.tagName === "A" ||
    (el.tagName === "INPUT" && el.type === "button") || el.getAttribute("role") === "button";

  function mark(episode, withProps) {
    if (state.episode !== episode) { forget(); state.episode = episode; }
    const screen = withProps ? screenTransform() : null;
    const frames = new Map();
    const props = {};
    const marked = new Set();
    for (const { doc, frame } of documents()) {
      const prefix = frame ? frame.getAttribute("bid") || "" : "";
      const seen = new Set();
      const clips = new Map();
      for (const el of elementsOf(doc, [])) {
        let bid = el.getAttribute("bid");
        if (bid === null || seen.has(bid) || !state.byBid.has(bid) || state.byBid.get(bid) !== el) {
          const local = (el.tagName === "IFRAME" || el.tagName === "FRAME")
            ? frameLetters(state.frames++) : String(state.elements++);
          bid = prefix + local;
          el.setAttribute("bid", bid);
          state.byBid.set(bid, el);
        }
        seen.add(bid);
        if (!withProps) continue;
        const g = geometry(el, frame, clips, frames);
        if (g === null) { props[bid] = [null, 0, false]; continue; }
        const boxArea = area(g.box);
        const visible = boxArea > 0 ? Math.min(1, area(g.shown) / boxArea) : 0;
        const [x0, y0] = toScreen(screen, g.box[0], g.box[1]);
        const [x1, y1] = toScreen(screen, g.box[2], g.box[3]);
        let som = false;
        if (visible > 0 && (x1 - x0) * (y1 - y0) >= 20 && pointerish(el)) {
          const cx = (g.shown[0] + g.shown[2]) / 2 - g.dx;
          const cy = (g.shown[1] + g.shown[3]) / 2 - g.dy;
          som = hitsItself(el, doc, cx, cy).ok;
        }
        if (som) {
          // The innermost mark wins, but nothing inside a marked button or link.
          for (let p = el.parentElement; p; p = p.parentElement) {
            if (!marked.has(p)) continue;
            if (BUTTONISH(p)) { som = false; } else { marked.delete(p); props[p.getAttribute("bid")][2] = false; }
            break;
          }
        }
        if (som) marked.add(el);
        props[bid] = [[round2(x0), round2(y0), round2(x1 - x0), round2(y1 - y0)], round2(visible), som];
      }
    }
    return { focused: focusedBid(), props, url: location.href, title: document.title };
  }

  function focusedBid() {
    let el = document.activeElement;
    for (;;) {
      if (el && el.shadowRoot && el.shadowRoot.activeElement) { el = el.shadowRoot.activeElement; continue; }
      let inner = null;
      if (el && (el.tagName === "IFRAME" || el.tagName === "FRAME")) {
        try { inner = el.contentDocument && el.contentDocument.activeElement; } catch (e) { inner = null; }
      }
      if (!inner) break;
      el = inner;
    }
    return (el && el.getAttribute && el.getAttribute("bid")) || "";
  }

  // The element of a bid, or a message saying why there is none.
  function element(bid) {
    const el = state.byBid.get(bid);
    if (el === undefined) {
      return { error: `bid '${bid}' is not on the page: no observation of this episode gave it (ask for a text observation, and use its bids)` };
    }
    if (!el.isConnected || el.getAttribute("bid") !== bid) {
      return { error: `bid '${bid}' is from an earlier observation: ${describe(el)} is no longer on the page` };
    }
    return { el };
  }

  function target(bid, scroll) {
    const found = element(bid);
    if (found.error) return found;
    const el = found.el;
    const doc = el.ownerDocument;
    const frame = doc.defaultView.frameElement;
    let g = geometry(el, frame, new Map(), new Map());
    if (g === null || area(g.box) === 0) {
      return { error: `bid '${bid}': ${describe(el)} is not rendered (display: none, or no size)` };
    }
    if (area(g.shown) === 0 && !(el.checkVisibility ? el.checkVisibility({ opacityProperty: true, visibilityProperty: true }) : true)) {
      return { error: `bid '${bid}': ${describe(el)} is hidden (visibility: hidden or opacity: 0)` };
    }
    if (scroll && area(g.shown) < 0.99 * area(g.box)) {
      el.scrollIntoView({ block: "center", inline: "center", behavior: "instant" });
      g = geometry(el, frame, new Map(), new Map());
    }
    if (area(g.shown) === 0) {
      return { error: `bid '${bid}': ${describe(el)} is outside the visible page (scrolled or clipped away)` };
    }
    const cx = (g.shown[0] + g.shown[2]) / 2;
    const cy = (g.shown[1] + g.shown[3]) / 2;
    const hit = hitsItself(el, doc, cx - g.dx, cy - g.dy);
    if (!hit.ok && !(hit.hit && hit.hit.tagName === "LABEL" && hit.hit.control === el)) {
      return { error: `bid '${bid}': ${describe(el)} is covered by ${describe(hit.hit)} at its centre` };
    }
    const [x, y] = toScreen(screenTransform(), cx, cy);
    return { x, y, disabled: !!el.disabled };
  }

  const TEXT_TYPES = new Set(["", "email", "number", "password", "search", "tel", "text", "url"]);
  const SET_TYPES = new Set(["color", "date", "time", "datetime-local", "month", "range", "week"]);

  // Focus a field and select its value, for the keys that replace it; or set the value
  // of a field no keys can type (a date, a colour) as Playwright's fill does.
  function fill(bid, value) {
    const found = element(bid);
    if (found.error) return found;
    const el = found.el;
    if (el.disabled) return { error: `bid '${bid}': ${describe(el)} is disabled` };
    if (el.tagName === "INPUT") {
      const type = (el.getAttribute("type") || "").toLowerCase();
      if (SET_TYPES.has(type)) {
        el.focus();
        el.value = value;
        el.dispatchEvent(new Event("input", { bubbles: true, composed: true }));
        el.dispatchEvent(new Event("change", { bubbles: true }));
        return { typed: false };
      }
      if (!TEXT_TYPES.has(type)) return { error: `bid '${bid}': an input of type "${type}" cannot be filled (click it)` };
      if (el.readOnly) return { error: `bid '${bid}': ${describe(el)} is read-only` };
      el.focus();
      el.select();
      return { typed: true };
    }
    if (el.tagName === "TEXTAREA") {
      if (el.readOnly) return { error: `bid '${bid}': ${describe(el)} is read-only` };
      el.focus();
      el.select();
      return { typed: true };
    }
    if (el.isContentEditable) {
      el.focus();
      const range = el.ownerDocument.createRange();
      range.selectNodeContents(el);
      const selection = el.ownerDocument.defaultView.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      return { typed: true };
    }
    if (el.tagName === "SELECT") return { error: `bid '${bid}': ${describe(el)} is a <select>: use select_option` };
    return { error: `bid '${bid}': ${describe(el)} is not an <input>, <textarea> or editable element` };
  }

  function select(bid, option) {
    const found = element(bid);
    if (found.error) return found;
    const el = found.el;
    if (el.tagName !== "SELECT") return { error: `bid '${bid}': ${describe(el)} is not a <select>` };
    if (el.disabled) return { error: `bid '${bid}': ${describe(el)} is disabled` };
    const norm = (s) => s.replace(/\s+/g, " ").trim();
    const chosen = [...el.options].find((o) => o.value === option || norm(o.label) === norm(option));
    if (!chosen) {
      const labels = [...el.options].map((o) => JSON.stringify(norm(o.label))).slice(0, 20).join(", ");
      return { error: `bid '${bid}': no option ${JSON.stringify(option)}; its options: ${labels}` };
    }
    if (chosen.disabled) return { error: `bid '${bid}': option ${JSON.stringify(option)} is disabled` };
    el.focus();
    chosen.selected = true;
    el.dispatchEvent(new Event("input", { bubbles: true, composed: true }));
    el.dispatchEvent(new Event("change", { bubbles: true }));
    return {};
  }

  function focus(bid) {
    const found = element(bid);
    if (found.error) return found;
    found.el.focus();
    return {};
  }

  Object.defineProperty(window, KEY, {
    value: { mark, target, fill, select, focus }, configurable: true, enumerable: false,
  });
  return true;
})()
