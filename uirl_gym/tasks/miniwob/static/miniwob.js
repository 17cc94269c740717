// A MiniWoB++ page as a uirl task app: added to the head of the page served from the
// installed `miniwob` wheel (the page is not changed on disk), after uirl's page bridge
// (/task/uirl.js), on which it is built. On uirl.onLoad it starts the episode the
// session server asks for (Math.seedrandom, then core.startEpisodeReal(), as the
// `miniwob` package's own env does); it reports the page's reward with uirl.record when
// core.endEpisode runs, and answers uirl.onInspect (element boxes in screen pixels) for
// scripted experts and tests.
(() => {
  let reported = false;
  const finite = (v) => (typeof v === "number" && isFinite(v) ? v : null);

  function record(event) {
    // Counted in uirlPending by the bridge: the settle rule waits for the record.
    uirl.record(event).catch((e) => console.warn("uirl.record failed", e));
  }

  let hooked = false;
  let pageMaxTime = null;
  function hookEndEpisode() {
    if (hooked) return;
    hooked = true;
    const end = core.endEpisode;
    core.endEpisode = function (...args) {
      // The page accepts one end per episode (EP_TIMER null afterwards): report that one.
      const running = core.EP_TIMER !== null;
      const out = end.apply(this, args);
      if (running && WOB_DONE_GLOBAL && !reported) {
        reported = true;
        const reason = WOB_REWARD_REASON == null ? null : String(WOB_REWARD_REASON).slice(0, 500);
        record({type: "end", raw_reward: finite(WOB_RAW_REWARD_GLOBAL),
                reward: finite(WOB_REWARD_GLOBAL), reason});
      }
      return out;
    };
  }

  // Images the page's CSS names (icons) and its <img> tags: loaded and decoded before
  // the episode's first screenshot, which would otherwise race them (one seed, two
  // screens).
  function imageLoaded(url) {
    return new Promise((resolve) => {
      const img = new Image();
      img.onload = () => img.decode().catch(() => {}).then(resolve);
      img.onerror = resolve;
      img.src = url;
    });
  }
  async function preloadImages() {
    const urls = new Set();
    for (const sheet of document.styleSheets) {
      let rules;
      try { rules = sheet.cssRules; } catch (e) { continue; }
      for (const rule of rules) {
        for (const m of rule.cssText.matchAll(/url\(["']?([^"')]+\.(?:png|gif|jpe?g|svg))["']?\)/gi)) {
          urls.add(new URL(m[1], sheet.href || location.href).href);
        }
      }
    }
    await Promise.all([...urls].map(imageLoaded));
  }
  const imagesShown = () => Promise.all([...document.images].filter((i) => i.src)
    .map((i) => (i.complete ? i.decode().catch(() => {}) : imageLoaded(i.src))));
  const within = (ms, promise) =>
    Promise.race([promise, new Promise((r) => setTimeout(r, ms))]);

  // Called once per episode: in a fresh page, or again in the page of the last episode
  // (the server restarts MiniWoB++ tasks in place, as the miniwob package's env does).
  uirl.onLoad(async (state) => {
    if (core.EP_TIMER !== null && !WOB_DONE_GLOBAL) {
      // The last episode still runs: end it unreported (the miniwob package's
      // force_stop), so that its timer and handlers are gone.
      reported = true;
      core.endEpisode(0, false, "reset");
    }
    reported = false;
    if (document.activeElement && document.activeElement !== document.body) {
      document.activeElement.blur();  // as in a fresh page: nothing focused
    }
    await within(5000, preloadImages());
    hookEndEpisode();
    // jQuery animations (accordions, menus) end at once: every screen is a settled one.
    if (window.jQuery) window.jQuery.fx.off = true;
    // The page's own episode length (10 s for most; the time-discounted reward scales
    // by it), or the episode's limit: never the last episode's limit in a restarted page.
    if (pageMaxTime === null) pageMaxTime = core.EPISODE_MAX_TIME;
    core.EPISODE_MAX_TIME = state.time_limit_ms ?? pageMaxTime;
    if (state.seed !== null) Math.seedrandom(state.seed);
    core.setDataMode(state.data_mode);
    core.startEpisodeReal();
    if (state.time_limit_ms === null) {
      // No wall-clock limit: drop the page's timeout, but keep EP_TIMER non-null, which
      // is how core.endEpisode knows the episode is running.
      clearTimeout(core.EP_TIMER);
      core.EP_TIMER = 0;
    }
    core.clearTimer();  // the (hidden) countdown display
    // FlightWoB pages load their form in an iframe and say when it is ready.
    const t0 = performance.now();
    while (!WOB_TASK_READY && performance.now() - t0 < 10000) {
      await new Promise((r) => setTimeout(r, 5));
    }
    await within(5000, imagesShown());
    const u = core.getUtterance();
    const utterance = typeof u === "string" ? u : u.utterance;
    return {utterance, fields: typeof u === "string" ? null : u.fields, ready: !!WOB_TASK_READY};
  });

  const HIDDEN = "#sync-task-cover, #reward-display, #click-canvas";

  uirl.onInspect(() => {
    const vv = window.visualViewport;
    const s = vv.scale;
    const box = (r, dx, dy) => [
      Math.round((r.left + dx - vv.offsetLeft) * s), Math.round((r.top + dy - vv.offsetTop) * s),
      Math.round(r.width * s), Math.round(r.height * s)];
    const elements = [];
    const texts = [];
    const active = document.activeElement;
    function walk(doc, dx, dy, frame) {
      const view = doc.defaultView;
      for (const el of doc.body.querySelectorAll("*")) {
        if (el.closest(HIDDEN)) continue;
        const r = el.getBoundingClientRect();
        if (r.width === 0 || r.height === 0) continue;
        const cs = view.getComputedStyle(el);
        if (cs.visibility === "hidden") continue;
        const own = [...el.childNodes].filter((n) => n.nodeType === 3)
          .map((n) => n.data.trim()).filter(Boolean).join(" ");
        const e = {
          i: elements.length, tag: el.tagName.toLowerCase(), id: el.id || null,
          classes: el.getAttribute("class") || "", own_text: own,
          text: (el.textContent || "").replace(/\s+/g, " ").trim().slice(0, 300),
          box: box(r, dx, dy), frame, color: cs.backgroundColor, fill: cs.fill,
          focused: el === active || el === doc.activeElement,
        };
        if (el instanceof view.HTMLInputElement) {
          e.type = el.type;
          e.value = el.value;
          e.checked = el.checked;
        } else if (el instanceof view.HTMLTextAreaElement || el instanceof view.HTMLSelectElement) {
          e.value = el.value;
        }
        if (el instanceof view.HTMLSelectElement) e.options = [...el.options].map((o) => o.text);
        if (el.scrollHeight > el.clientHeight + 1 && ["auto", "scroll"].includes(cs.overflowY)) {
          e.scroll = {top: el.scrollTop, height: el.scrollHeight, client: el.clientHeight};
        }
        elements.push(e);
        if (el.tagName === "IFRAME" && el.contentDocument && el.contentDocument.body) {
          walk(el.contentDocument, dx + r.left + el.clientLeft, dy + r.top + el.clientTop,
               frame + 1);
        }
      }
      const walker = doc.createTreeWalker(doc.body, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        if (!n.data.trim() || !n.parentElement || n.parentElement.closest(HIDDEN)) continue;
        const tag = n.parentElement.tagName;
        if (tag === "SCRIPT" || tag === "STYLE") continue;
        const range = doc.createRange();
        range.selectNodeContents(n);
        const r = range.getBoundingClientRect();
        if (r.width === 0 || r.height === 0) continue;
        texts.push({text: n.data.trim(), box: box(r, dx, dy), frame});
      }
    }
    walk(document, 0, 0, 0);
    const wrap = document.getElementById("wrap");
    return {
      utterance: core.getUtterance(),
      done: !!WOB_DONE_GLOBAL,
      raw_reward: finite(WOB_RAW_REWARD_GLOBAL),
      page_scale: s,
      task_area: wrap ? box(wrap.getBoundingClientRect(), 0, 0) : null,
      elements,
      texts,
    };
  });
})();
