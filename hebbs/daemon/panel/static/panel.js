// The Memory Palace's page script: live updates over server-sent events, and small conveniences.
// No inline script anywhere (the Content-Security-Policy forbids it): everything hooks in from here.
(function () {
  "use strict";
  const vault = document.body.dataset.vault;

  // Live: when the daemon reports a change to this vault, fetch this page again and swap its <main>.
  // Pages where the user is typing (a focused field) wait for the next change instead of losing input.
  const live = document.getElementById("live");
  let pending = false;
  let refreshing = false;
  async function refresh() {
    const main = document.getElementById("main");
    if (!main || !main.dataset.live) return;
    const active = document.activeElement;
    if (active && main.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName)) { pending = true; return; }
    if (refreshing) { pending = true; return; }
    refreshing = true;
    try {
      const response = await fetch(location.href, { credentials: "same-origin" });
      if (!response.ok) return;
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = doc.getElementById("main");
      if (fresh) {
        main.replaceChildren(...fresh.childNodes);
        main.classList.remove("flash"); void main.offsetWidth; main.classList.add("flash");
        document.body.dataset.updatedAt = String(Date.now());
        hook(main);
      }
    } finally {
      refreshing = false;
      if (pending) { pending = false; setTimeout(refresh, 200); }
    }
  }
  if (window.EventSource) {
    const source = new EventSource("/events");
    source.addEventListener("open", () => live && live.classList.add("on"));
    source.addEventListener("error", () => live && live.classList.remove("on"));
    source.addEventListener("change", (event) => {
      let change = {};
      try { change = JSON.parse(event.data); } catch (e) { return; }
      // The overview shows every vault; other pages show one.
      if (location.pathname === "/" || !change.vault || change.vault === vault) refresh();
    });
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
    root.querySelectorAll("form.auto-submit select").forEach((select) => {
      select.addEventListener("change", () => select.form.submit());
    });
    // The playground recalls in place: the same GET (so the address still names the request), its
    // results swapped in without reloading the page and its scripts.
    root.querySelectorAll("form#recall-form").forEach((form) => {
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        const target = form.action + "?" + new URLSearchParams(new FormData(form)).toString();
        const response = await fetch(target, { credentials: "same-origin" });
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
