// stm ui: the console's only script, built into the binary. Four jobs: ask before a
// control is posted, refresh the live part of a page without reloading it, show a trace
// step's explanation when the step is clicked, and draw a machine's transitions as arrows
// between its state boxes.
"use strict";

// every control form says what it does in data-confirm: nothing is posted unconfirmed
document.addEventListener("submit", (event) => {
  const question = event.target.dataset.confirm;
  if (question !== undefined && !window.confirm(question)) {
    event.preventDefault();
  }
});

// the trace steps whose explanation is shown, by position: kept across refreshes
const openSteps = new Set();

function showExplanations() {
  for (const row of document.querySelectorAll("table.trace tr.explain")) {
    const open = openSteps.has(row.dataset.explains);
    row.hidden = !open;
    const step = document.querySelector(`table.trace tr.step[data-step="${row.dataset.explains}"]`);
    if (step) step.classList.toggle("open", open);
  }
}

document.addEventListener("click", (event) => {
  const step = event.target.closest?.("table.trace tr.step");
  if (!step) return;
  const at = step.dataset.step;
  if (openSteps.has(at)) openSteps.delete(at);
  else openSteps.add(at);
  showExplanations();
});

// fetch this same page and swap its #live element in place
async function refresh() {
  const live = document.getElementById("live");
  if (!live) return;
  try {
    const response = await fetch(window.location.href, { credentials: "same-origin" });
    if (!response.ok) {
      live.dataset.stale = "the console answered " + response.status;
      return;
    }
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.getElementById("live");
    if (fresh) {
      live.replaceChildren(...fresh.childNodes);
      delete live.dataset.stale;
      showExplanations();
    }
  } catch (err) {
    live.dataset.stale = "the console is not answering";
  }
}

// The transitions listed in table.arrows, drawn on the chart's SVG layer: from the edge
// of the source box toward the target's, bowed so that two opposite arrows do not overlap,
// a loop for a self-transition, each labelled with its event and guard.
const SVG = "http://www.w3.org/2000/svg";

function boxOf(chart, path) {
  return chart.querySelector(`.state[data-path="${CSS.escape(path)}"]`);
}

// where the segment from the centre of `r` toward (x, y) leaves the rectangle
function borderPoint(r, x, y) {
  const cx = r.x + r.w / 2, cy = r.y + r.h / 2;
  const dx = x - cx, dy = y - cy;
  if (dx === 0 && dy === 0) return [cx, cy];
  const scale = Math.min(Math.abs(r.w / 2 / (dx || 1e-9)), Math.abs(r.h / 2 / (dy || 1e-9)));
  return [cx + dx * Math.min(scale, 1), cy + dy * Math.min(scale, 1)];
}

function drawEdges() {
  const chart = document.querySelector(".chart");
  const svg = chart?.querySelector("svg.edges");
  const rows = document.querySelectorAll("table.arrows tr[data-from]");
  if (!svg) return;
  for (const old of svg.querySelectorAll(".edge, .edge-label")) old.remove();
  svg.setAttribute("width", chart.scrollWidth);
  svg.setAttribute("height", chart.scrollHeight);
  const origin = chart.getBoundingClientRect();
  const rect = (el) => {
    const b = el.getBoundingClientRect();
    return {
      x: b.left - origin.left + chart.scrollLeft - chart.clientLeft,
      y: b.top - origin.top + chart.scrollTop - chart.clientTop,
      w: b.width,
      h: b.height,
    };
  };
  const seen = new Map();
  for (const row of rows) {
    const from = boxOf(chart, row.dataset.from);
    const to = boxOf(chart, row.dataset.to);
    if (!from || !to) continue;
    const a = rect(from), b = rect(to);
    let d, lx, ly;
    if (from === to) {
      // a loop on the box's right edge
      const x = a.x + a.w, y = a.y + Math.min(18, a.h / 2);
      d = `M${x},${y - 6} C${x + 40},${y - 30} ${x + 40},${y + 30} ${x},${y + 6}`;
      lx = x + 34; ly = y;
    } else {
      const key = [row.dataset.from, row.dataset.to].sort().join("\u0000");
      const nth = seen.get(key) ?? 0;
      seen.set(key, nth + 1);
      const [x1, y1] = borderPoint(a, b.x + b.w / 2, b.y + b.h / 2);
      const [x2, y2] = borderPoint(b, a.x + a.w / 2, a.y + a.h / 2);
      const len = Math.hypot(x2 - x1, y2 - y1) || 1;
      // bow each further arrow between the same two boxes a little more
      const bow = 14 + 16 * nth;
      const mx = (x1 + x2) / 2 - ((y2 - y1) / len) * bow;
      const my = (y1 + y2) / 2 + ((x2 - x1) / len) * bow;
      d = `M${x1},${y1} Q${mx},${my} ${x2},${y2}`;
      lx = (x1 + 2 * mx + x2) / 4; ly = (y1 + 2 * my + y2) / 4;
    }
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("class", "edge");
    path.setAttribute("d", d);
    path.setAttribute("marker-end", "url(#arrowhead)");
    path.dataset.from = row.dataset.from;
    path.dataset.to = row.dataset.to;
    const label = document.createElementNS(SVG, "text");
    label.setAttribute("class", "edge-label");
    label.setAttribute("x", lx);
    label.setAttribute("y", ly);
    label.setAttribute("text-anchor", "middle");
    label.textContent = row.dataset.label;
    svg.append(path, label);
  }
}

drawEdges();
window.addEventListener("resize", drawEdges);

for (const button of document.querySelectorAll("[data-refresh]")) {
  button.addEventListener("click", refresh);
}

const live = document.getElementById("live");
const every = live ? Number(live.dataset.autoRefresh) : 0;
if (every > 0) {
  // not while the operator is typing a reason or picking a leaf
  setInterval(() => {
    const active = document.activeElement;
    if (!active || !["INPUT", "SELECT", "TEXTAREA"].includes(active.tagName)) refresh();
  }, every * 1000);
}
