// stm ui: the console's only script, built into the binary. Three jobs: ask before a
// control is posted, refresh the live part of a page without reloading it, and show a
// trace step's explanation when the step is clicked.
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
