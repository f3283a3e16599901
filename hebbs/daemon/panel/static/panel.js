// The Memory Palace's page script: live updates over server-sent events, and small conveniences.
// No inline script anywhere (the Content-Security-Policy forbids it): everything hooks in from here.
(function () {
  "use strict";
  const vault = document.body.dataset.vault;
  const live = document.getElementById("live");

  // The daemon's state, in a banner: without it a stopped daemon greys one dot and every action
  // fails silently, and a restarted one (new token) answers every tab with 403.
  const SAID = {
    stopped: "The daemon stopped: this page shows what it last knew and nothing can be changed. "
      + "Start it again with `hebbs palace`.",
    restarted: "The daemon restarted or this session ended: open the panel again with `hebbs palace`.",
    reopened: "The panel was opened again with the daemon's new token: reload this page to use it.",
  };
  function say(state) {
    document.body.dataset.daemon = state;
    let banner = document.getElementById("daemon-banner");
    if (state === "up") { if (banner) banner.remove(); return; }
    if (!banner) {
      banner = document.createElement("div");
      banner.id = "daemon-banner";
      banner.className = "banner";
      banner.setAttribute("role", "alert");
      document.body.prepend(banner);
    }
    banner.textContent = SAID[state];
  }
  let checking = false;
  async function check() {
    if (checking) return;
    checking = true;
    const before = document.body.dataset.daemon;
    try {
      const response = await fetch("/api/alive", { credentials: "same-origin", cache: "no-store" });
      if (response.status === 403) say("restarted");
      // This page's forms still carry the old token: it has to be loaded again.
      else if (response.ok) say(before === "restarted" || before === "reopened" ? "reopened" : "up");
    } catch (err) {
      say("stopped");
    } finally {
      checking = false;
    }
  }

  // Fields holding what the user typed and has not saved: a refresh carries them into the fresh page.
  function fields(root) {
    const seen = {};
    return Array.from(root.querySelectorAll("input, textarea, select")).map((field) => {
      const form = field.form ? (field.form.getAttribute("action") || "") + "#" + (field.form.id || field.form.className) : "";
      const key = form + "|" + field.name;
      seen[key] = (seen[key] || 0) + 1;
      return [key + "|" + seen[key], field];
    });
  }
  function edited(field) {
    if (field.type === "hidden") return false;
    if (field.type === "checkbox" || field.type === "radio") return field.checked !== field.defaultChecked;
    if (field.tagName === "SELECT") return Array.from(field.options).some((o) => o.selected !== o.defaultSelected);
    return field.value !== field.defaultValue;
  }
  function unsaved(root) {
    const kept = new Map();
    fields(root).forEach(([key, field]) => {
      if (edited(field)) kept.set(key, { value: field.value, checked: field.checked });
    });
    return kept;
  }
  function restore(root, kept) {
    fields(root).forEach(([key, field]) => {
      const old = kept.get(key);
      if (!old) return;
      if (field.type === "checkbox" || field.type === "radio") field.checked = old.checked;
      else field.value = old.value;
    });
  }

  // Live: when the daemon reports a change to this vault, fetch this page again and swap its <main>.
  // Pages where the user is typing (a focused field) wait for the next change instead of losing input.
  let pending = false;
  let refreshing = false;
  // A swap between a button's press and its release replaces the button, and the click is lost; a swap
  // after a form was sent shows the old page again while its answer is on the way. Both wait: a press
  // until it ends, a sent form for good (the answer is a new page).
  let pressed = false;
  let leaving = false;
  const released = () => { pressed = false; };
  document.addEventListener("pointerdown", () => { pressed = true; }, true);
  document.addEventListener("pointerup", () => setTimeout(released, 0), true);  // after the click it makes
  document.addEventListener("pointercancel", released, true);
  window.addEventListener("blur", released);  // a release outside the window may never be heard
  document.addEventListener("submit", (event) => { if (!event.defaultPrevented) leaving = true; });
  window.addEventListener("pageshow", () => { leaving = false; });
  // A field the user is in. Checked again once the fresh page has come: a swap while they type takes
  // the field away under the cursor (what they type next goes nowhere), and a field entered while the
  // fetch was on its way is as much in use as one entered before it (seen at load 15: the page's own
  // refresh after its open swapped the revise box between its focus and the text typed into it).
  function typing(main) {
    const active = document.activeElement;
    return Boolean(active && main.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName));
  }
  // Changes wait while the user types, and the live mark says so; they show once the field is left.
  function waiting(on) {
    pending = pending || on;
    if (live) {
      live.classList.toggle("waiting", on);
      live.title = on ? "changes arrived: they show when you leave this field" : "live updates";
    }
  }
  document.addEventListener("focusout", () => {
    if (pending && !refreshing) setTimeout(() => { if (pending && !refreshing) { pending = false; refresh(); } }, 0);
  });
  async function refresh() {
    const main = document.getElementById("main");
    if (!main || !main.dataset.live || leaving) return;
    if (pressed) { setTimeout(refresh, 200); return; }
    if (typing(main)) { waiting(true); return; }
    if (refreshing) { pending = true; return; }
    refreshing = true;
    try {
      const response = await fetch(location.href, { credentials: "same-origin" });
      if (!response.ok) { check(); return; }
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = doc.getElementById("main");
      if (leaving) return;
      if (typing(main)) { waiting(true); return; }
      if (pressed) { pending = true; return; }
      if (fresh) {
        waiting(false);
        const kept = unsaved(main);
        main.replaceChildren(...fresh.childNodes);
        restore(main, kept);
        main.classList.remove("flash"); void main.offsetWidth; main.classList.add("flash");
        document.body.dataset.updatedAt = String(Date.now());
        hook(main);
      }
    } catch (err) {
      check();
    } finally {
      refreshing = false;
      if (pending && !typing(main)) { pending = false; setTimeout(refresh, 200); }
    }
  }

  function heard(message) {
    if (message.type === "open") {
      if (live) live.classList.add("on");
      if (document.body.dataset.daemon && document.body.dataset.daemon !== "up") check();
    } else if (message.type === "error") {
      if (live) live.classList.remove("on");
      check();
    } else if (message.type === "change") {
      let change = {};
      try { change = JSON.parse(message.data); } catch (e) { return; }
      // The overview shows every vault; other pages show one.
      if (location.pathname === "/" || !change.vault || change.vault === vault) refresh();
    }
  }
  if (window.SharedWorker) {
    // One stream for all tabs (events-worker.js says why).
    const worker = new SharedWorker("/static/events-worker.js");
    worker.port.addEventListener("message", (event) => heard(event.data));
    worker.port.start();
    window.addEventListener("pagehide", (event) => { if (!event.persisted) worker.port.postMessage("bye"); });
  } else if (window.EventSource) {
    const source = new EventSource("/events");
    source.addEventListener("open", () => heard({ type: "open" }));
    source.addEventListener("error", () => heard({ type: "error" }));
    source.addEventListener("change", (event) => heard({ type: "change", data: event.data }));
  }

  function hook(root) {
    // Sliders show their value as they move.
    root.querySelectorAll("input[type=range][data-out]").forEach((input) => {
      const out = document.getElementById(input.dataset.out);
      input.addEventListener("input", () => { if (out) out.textContent = Number(input.value).toFixed(2); });
    });
    root.querySelectorAll("button[data-copy]").forEach((button) => {
      button.addEventListener("click", async () => {
        const text = document.getElementById(button.dataset.copy).textContent;
        try { await navigator.clipboard.writeText(text); button.textContent = "copied"; }
        catch (e) { const range = document.createRange(); range.selectNodeContents(document.getElementById(button.dataset.copy));
          const sel = getSelection(); sel.removeAllRanges(); sel.addRange(range); button.textContent = "selected: Ctrl-C"; }
      });
    });
    root.querySelectorAll("form.auto-submit select, form.auto-submit input[type=checkbox]").forEach((field) => {
      field.addEventListener("change", () => field.form.submit());
    });
    // The playground recalls in place: the same GET (so the address still names the request), its
    // results swapped in without reloading the page and its scripts. A recall that counts as use
    // changes scores, so it is a POST with the session's form value; its address then only shows it again.
    root.querySelectorAll("form#recall-form").forEach((form) => {
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        const params = new URLSearchParams(new FormData(form));
        const target = form.action + "?" + params.toString();
        let response;
        try {
          if (form.elements.reinforce && form.elements.reinforce.checked) {
            params.set("csrf", form.dataset.csrf);
            response = await fetch(form.action, { method: "POST", body: params, credentials: "same-origin" });
          } else {
            response = await fetch(target, { credentials: "same-origin" });
          }
        } catch (err) {
          check();
          return;
        }
        if (response.status === 403) { check(); return; }
        const doc = new DOMParser().parseFromString(await response.text(), "text/html");
        const fresh = doc.getElementById("main");
        const main = document.getElementById("main");
        if (!fresh || !main) { location.href = target; return; }
        history.pushState(null, "", target);
        main.replaceChildren(...fresh.childNodes);
        hook(main);
      });
    });
    // An index run in progress: poll its progress once a second until it ends.
    if (root.querySelector("[data-indexing]")) setTimeout(refresh, 1000);
  }
  window.addEventListener("popstate", () => location.reload());
  const picker = document.getElementById("vault-select");
  if (picker) picker.addEventListener("change", () => picker.form.submit());
  hook(document);
})();
