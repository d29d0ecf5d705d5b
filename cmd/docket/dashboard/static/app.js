// Docket dashboard: polling of the page's own HTML and lease countdowns.
// The server draws the rate sparklines from its own history. No build
// step, no dependencies.
"use strict";

// human writes seconds for a person: 19m34s, 4.2s, 1h02m.
function human(s) {
  const a = Math.abs(s);
  if (a < 60) return `${a.toFixed(1)}s`;
  const h = Math.floor(a / 3600), m = Math.floor((a % 3600) / 60), sec = Math.floor(a % 60);
  if (h > 0) return `${h}h${String(m).padStart(2, "0")}m`;
  return `${m}m${String(sec).padStart(2, "0")}s`;
}

function countdowns() {
  for (const el of document.querySelectorAll(".countdown[data-until]")) {
    const left = (Number(el.dataset.until) - Date.now()) / 1000;
    el.textContent = left >= 0 ? human(left) : `expired ${human(left)} ago`;
    el.classList.toggle("bad", left < 0);
  }
}

async function poll(main) {
  // A viewer typing in a filter keeps the page they are editing.
  if (main.contains(document.activeElement) && document.activeElement.tagName === "INPUT") return;
  let resp;
  try {
    resp = await fetch(location.href, { headers: { "X-Docket-Poll": "1" }, credentials: "same-origin", cache: "no-store" });
  } catch (e) {
    document.body.classList.add("stale");
    return;
  }
  if (resp.status === 401) { location.assign("/login"); return; }
  const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
  const fresh = doc.getElementById("main");
  if (!fresh) return;
  document.body.classList.toggle("stale", !resp.ok);
  main.innerHTML = fresh.innerHTML;
  countdowns();
}

document.addEventListener("DOMContentLoaded", () => {
  countdowns();
  setInterval(countdowns, 250);
  const main = document.getElementById("main");
  const every = Number(main && main.dataset.poll);
  if (every > 0) {
    let busy = false;
    setInterval(async () => {
      if (busy) return;
      busy = true;
      try { await poll(main); } finally { busy = false; }
    }, every);
  }
  for (const all of document.querySelectorAll("input.all-rows")) {
    all.addEventListener("change", () => {
      for (const box of all.closest("form").querySelectorAll('input[name="id"]')) box.checked = all.checked;
    });
  }
});
