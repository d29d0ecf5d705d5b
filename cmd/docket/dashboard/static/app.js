// Docket dashboard: polling of the page's own HTML, rate sparklines and
// lease countdowns. No build step, no dependencies.
"use strict";

const history = new Map(); // "queue/tenant" -> [{t, enq, done}]
const keep = 60;           // samples: 2 minutes at 2 s

function sample() {
  const now = Date.now();
  for (const tr of document.querySelectorAll("tr[data-key][data-enq]")) {
    const h = history.get(tr.dataset.key) || [];
    h.push({ t: now, enq: Number(tr.dataset.enq), done: Number(tr.dataset.done) });
    while (h.length > keep) h.shift();
    history.set(tr.dataset.key, h);
  }
}

function draw() {
  for (const tr of document.querySelectorAll("tr[data-key]")) {
    const h = history.get(tr.dataset.key) || [];
    for (const svg of tr.querySelectorAll("svg.spark")) {
      const series = svg.dataset.series;
      const rates = [];
      for (let i = 1; i < h.length; i++) {
        const dt = (h[i].t - h[i - 1].t) / 1000;
        rates.push(dt > 0 ? Math.max(0, (h[i][series] - h[i - 1][series]) / dt) : 0);
      }
      svg.replaceChildren();
      if (rates.length === 0) continue;
      svg.dataset.peak = String(Math.max(...rates)); // read by the browser test
      const max = Math.max(1, ...rates);
      // Few samples spread over the width; once there are enough, each
      // keeps a fixed step and the oldest scroll off the left.
      const w = 120, ht = 24, step = Math.max(w / (keep - 2), w / Math.max(1, rates.length - 1));
      const pts = rates.map((r, i) => `${(w - (rates.length - 1 - i) * step).toFixed(1)},${(ht - 2 - (r / max) * (ht - 4)).toFixed(1)}`);
      const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
      line.setAttribute("points", pts.join(" "));
      line.setAttribute("fill", "none");
      line.setAttribute("stroke", "currentColor");
      svg.appendChild(line);
      const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
      title.textContent = `${rates[rates.length - 1].toFixed(1)}/s now, peak ${max.toFixed(1)}/s`;
      svg.appendChild(title);
    }
  }
}

function countdowns() {
  for (const el of document.querySelectorAll(".countdown[data-until]")) {
    const left = (Number(el.dataset.until) - Date.now()) / 1000;
    el.textContent = left >= 0 ? `${left.toFixed(1)}s` : `expired ${(-left).toFixed(1)}s ago`;
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
  sample();
  draw();
  countdowns();
}

document.addEventListener("DOMContentLoaded", () => {
  sample();
  draw();
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
  const all = document.getElementById("all-rows");
  if (all) all.addEventListener("change", () => {
    for (const box of document.querySelectorAll('input[name="id"]')) box.checked = all.checked;
  });
});
