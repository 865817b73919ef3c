// lograil console: served as /console.js (the Content-Security-Policy allows no inline script).
// Refreshes the page's <main> every 5 s unless "pause" is ticked; the new markup is the
// server's own page (escaped there), parsed and swapped in whole.
"use strict";
(function () {
  const root = document.documentElement;
  root.dataset.js = "ready";
  const pause = document.getElementById("pause");
  if (pause) {
    pause.checked = sessionStorage.getItem("lograil-pause") === "1";
    pause.addEventListener("change", function () {
      sessionStorage.setItem("lograil-pause", pause.checked ? "1" : "0");
    });
  }
  let refreshes = 0;
  async function refresh() {
    if (pause && pause.checked) return;
    try {
      const response = await fetch(location.href, { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) return;
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.querySelector("main");
      const main = document.querySelector("main");
      if (fresh && main) {
        main.replaceWith(document.adoptNode(fresh));
        refreshes += 1;
        root.dataset.refreshes = String(refreshes);
      }
    } catch (e) {
      // The broker is restarting or gone: try again at the next tick.
    }
  }
  setInterval(refresh, 5000);
})();
