// uirl's page bridge: the one script every task app loads before its own
// (`<script src="/task/uirl.js"></script>`; the session server serves it; MiniWoB++
// pages get it in their head, before the page script built on it). It is how
// the session server and an app talk, in both directions, inside the browser (never
// over HTTP, so nobody outside the browser can fake a record):
//
//   uirl.onLoad((state) => ...)     render an episode: `state` is the task's
//                                   reset()["app_state"] (it has `episode`); may
//                                   return a value (JSON) for Task.page_loaded
//   uirl.record(event)              hand `event` (JSON) to Task.handle_event; a promise
//                                   of its answer, rejected when the record fails.
//                                   `episode` is added; screenshots wait for it
//   uirl.onInspect(() => ({...}))   the page's privileged state (element boxes,
//                                   values) for Task.oracle: experts and tests
//   uirl.box(el)                    [x, y, width, height] of an element in page pixels
//   uirl.episode                    the current episode's id
//
// What the server calls (not the app): window.uirlLoad(state), window.uirlPending(),
// window.uirlInspect(); window.uirlEpisode tells it an episode is on screen (it reloads
// the app after the agent navigated away; unset while an episode loads, also when it
// loads again in the same page). window.uirlRecord is the browser binding the
// server installs before any script runs.
(() => {
  let pending = 0;
  let episode;
  let load = () => null;
  let inspect = () => ({});

  const uirl = {
    get episode() { return episode; },
    onLoad(fn) { load = fn; },
    onInspect(fn) { inspect = fn; },
    async record(event) {
      pending++;
      try {
        return await window.uirlRecord({episode, ...event});
      } finally {
        pending--;
      }
    },
    box(el) {
      if (!el) return null;
      const b = el.getBoundingClientRect();
      return [Math.round(b.left), Math.round(b.top), Math.round(b.width), Math.round(b.height)];
    },
  };

  Object.defineProperty(window, "uirl", {value: Object.freeze(uirl)});
  window.uirlLoad = async (state) => {
    window.uirlEpisode = undefined;
    episode = state.episode;
    const loaded = await load(state);
    window.uirlEpisode = episode;
    return loaded === undefined ? null : loaded;
  };
  window.uirlPending = () => pending;
  window.uirlInspect = () => inspect();
})();
