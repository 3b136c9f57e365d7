// usl web page: plain JS, no build step.
//
// Safety rule for this file: user text (criteria, use case, answers, model names) only ever
// reaches the DOM through textContent, .value or a text node; never innerHTML. The server's
// Content-Security-Policy forbids inline script as a second line of defence.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";

const state = {
  config: null,
  topics: [],          // [{id, name, n_queries, keywords}]
  boards: {default: null, custom: null},   // LeaderboardResponse payloads
  specs: {default: null, custom: null},    // the spec each board was asked with
  // from the URL; the server's defaults when null. calibration: "my calibrated judge" (check.js) when chosen
  base: {judge: null, benchmark: null, baseline: null, calibration: null},
  view: "default",
  controller: null,    // AbortController of the running custom request
  // Refinement by the reference CRM (/api/leaderboard/refine): one stream at a time, for one view;
  // fast[view] keeps the fast board it refines, status[view] the line shown under the title.
  refine: {controller: null, view: null, fast: {default: null, custom: null}, status: {default: "", custom: ""}},
  clickedAt: null,
  renderSeq: 0,
  pinned: null,        // {judge_version, data_version} of the link the page was opened with
};

// ---- small DOM functions ----------------------------------------------------------------

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null) continue;
    if (k === "dataset") Object.assign(node.dataset, v);
    else if (k === "text") node.textContent = v;
    else if (k === "title" || k === "className" || k === "type" || k === "value" || k === "checked"
             || k === "id" || k === "htmlFor" || k === "disabled" || k === "colSpan" || k === "scope") node[k] = v;
    else node.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svgEl(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

const fmt = (x, d = 1) => (x === null || x === undefined || Number.isNaN(x) ? "–" : Number(x).toFixed(d));
const lines = (text) => text.split("\n").map((s) => s.trim()).filter((s) => s.length > 0);

// ---- the spec: form <-> URL <-> API query ---------------------------------------------------

function readForm() {
  return {
    likes: lines($("likes").value),
    avoid: lines($("avoid").value),
    // The engine selects questions by topics or by use case, not both: a description wins.
    topics: $("use-case").value.trim() ? [] : [...document.querySelectorAll("#topic-list input:checked")].map((c) => c.value),
    use_case: $("use-case").value.trim(),
    judge: state.base.judge, benchmark: state.base.benchmark, baseline: state.base.baseline,
    calibration: state.base.calibration,
  };
}

function writeForm(spec) {
  $("likes").value = spec.likes.join("\n");
  $("avoid").value = spec.avoid.join("\n");
  $("use-case").value = spec.use_case || "";
  const chosen = new Set(spec.topics);
  for (const c of document.querySelectorAll("#topic-list input")) c.checked = chosen.has(c.value);
  updateHints();
}

function specFromURL() {
  const p = new URLSearchParams(location.search);
  return {
    likes: p.getAll("likes"), avoid: p.getAll("avoid"), topics: p.getAll("topics"),
    use_case: p.get("use_case") || "", judge: p.get("judge"), benchmark: p.get("benchmark"),
    baseline: p.get("baseline"), calibration: p.get("calibration"),
  };
}

function isCustom(spec) {
  return spec.likes.length > 0 || spec.avoid.length > 0 || spec.topics.length > 0 || spec.use_case !== ""
    || Boolean(spec.calibration);
}

function toParams(spec) {
  const p = new URLSearchParams();
  for (const x of spec.likes) p.append("likes", x);
  for (const x of spec.avoid) p.append("avoid", x);
  for (const x of spec.topics) p.append("topics", x);
  if (spec.use_case) p.set("use_case", spec.use_case);
  for (const k of ["judge", "benchmark", "baseline", "calibration"]) if (spec[k]) p.set(k, spec[k]);
  return p;
}

function writeURL(spec, versions) {
  const p = toParams(spec);
  // A shared link pins what made the board: the page that opens it warns when they differ.
  if (versions) for (const [k, v] of Object.entries(versions)) if (v) p.set(k, v);
  const q = isCustom(spec) ? "?" + p.toString() : "";
  history.replaceState(null, "", location.pathname + q);
}

function boardVersions(payload) {
  const s = payload.leaderboard.spec;
  return {judge_version: s.judge_identity, data_version: s.benchmark_version};
}

// The warnings for a board opened from a link made with another judge or other data (once).
function versionWarnings(payload) {
  const pinned = state.pinned;
  state.pinned = null;
  if (!pinned) return [];
  const now = boardVersions(payload);
  const out = [];
  if (pinned.judge_version && pinned.judge_version !== now.judge_version) {
    out.push(`This link was made with judge ${pinned.judge_version}; this board is by ${now.judge_version}: its figures may differ from the shared board's.`);
  }
  if (pinned.data_version && pinned.data_version !== now.data_version) {
    out.push(`This link was made with benchmark data ${pinned.data_version}; the data here is ${now.data_version}: its figures may differ from the shared board's.`);
  }
  return out;
}

function validate(spec) {
  const lim = state.config.limits;
  for (const [box, label] of [["likes", "likes"], ["avoid", "avoid"]]) {
    if (spec[box].length > lim.max_criteria) return `At most ${lim.max_criteria} ${label} criteria (you have ${spec[box].length}).`;
    const long = spec[box].find((s) => s.length > lim.max_criterion_chars);
    if (long) return `Each criterion is at most ${lim.max_criterion_chars} characters; one has ${long.length}.`;
  }
  if (spec.use_case.length > lim.max_use_case_chars) return `The use case is at most ${lim.max_use_case_chars} characters.`;
  return null;
}

function updateHints() {
  if (!state.config) return;
  const lim = state.config.limits;
  for (const box of ["likes", "avoid"]) {
    const xs = lines($(box).value);
    const longest = xs.reduce((m, s) => Math.max(m, s.length), 0);
    const hint = $(`${box}-hint`);
    hint.textContent = `${xs.length}/${lim.max_criteria} criteria · longest ${longest}/${lim.max_criterion_chars} characters`;
    hint.classList.toggle("over", xs.length > lim.max_criteria || longest > lim.max_criterion_chars);
  }
  $("use-case-count").textContent = String($("use-case").value.length);
  const n = document.querySelectorAll("#topic-list input:checked").length;
  const described = $("use-case").value.trim() !== "";
  $("topic-fieldset").disabled = described;
  $("topic-hint").textContent = described ? "Your description picks the questions; clear it to choose topics."
                                          : "None selected = all questions.";
  $("topic-count").textContent = described ? "" : n ? `(${n} of ${state.topics.length})` : `(all ${state.topics.length})`;
}

// ---- talking to the server ----------------------------------------------------------------

async function getJSON(url, signal) {
  const res = await fetch(url, {signal, headers: {Accept: "application/json"}});
  if (!res.ok) throw new Error(await errorText(res));
  return res.json();
}

async function errorText(res) {
  try {
    const body = await res.json();
    return typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
  } catch (_) {
    return `${res.status} ${res.statusText}`;
  }
}

// Reads the server-sent events of /api/leaderboard/stream through fetch (not EventSource) so
// that a 422 is readable and the request can be aborted when the user asks again. Resolves at the
// `result` event; a later `warnings` event (the contradiction check finishing after the ranking)
// goes to onLate.
function streamBoard(spec, signal, onProgress, onLate) {
  return new Promise((resolve, reject) => {
    (async () => {
      const res = await fetch("/api/leaderboard/stream?" + toParams(spec).toString(), {signal});
      if (!res.ok) throw new Error(await errorText(res));
      let got = false;
      for await (const [event, obj] of sseEvents(res)) {
        if (event === "progress" && !got) onProgress(obj);
        else if (event === "result") { got = true; resolve(obj); }
        else if ((event === "warnings" || event === "breakdown") && got && onLate) onLate(event, obj);
        else if (event === "error") throw new Error(obj.message || "ranking failed");
      }
      if (!got) throw new Error("the server closed the connection before the result");
    })().catch(reject);     // after resolve() this is a no-op
  });
}

async function* sseEvents(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buf += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let event = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      yield [event, data ? JSON.parse(data) : {}];
    }
  }
}

// ---- progress and errors ------------------------------------------------------------------

function showProgress(p) {
  $("progress").hidden = false;
  const pct = p.total > 0 ? Math.min(100, (100 * p.done) / p.total) : 5;
  $("progress-fill").style.width = `${pct}%`;
  $("progress-text").textContent = p.total > 0
    ? `Judging ${p.done.toLocaleString()} / ${p.total.toLocaleString()} comparisons · ${fmt(p.elapsed_s, 1)} s`
    : p.elapsed_s >= 1 ? `Ranking… ${fmt(p.elapsed_s, 0)} s` : "Starting…";
}

function hideProgress() { $("progress").hidden = true; }

function showError(msg) {
  const box = $("form-error");
  box.textContent = msg;
  box.hidden = !msg;
}

// ---- loading boards -----------------------------------------------------------------------

async function loadDefault(urlSpec) {
  const spec = {likes: [], avoid: [], topics: [], use_case: "", judge: urlSpec.judge,
                benchmark: urlSpec.benchmark, baseline: urlSpec.baseline};
  const payload = await streamBoard(spec, undefined, showProgress);
  const s = payload.leaderboard.spec;
  state.specs.default = {...spec, judge: s.judge, benchmark: s.benchmark, baseline: urlSpec.baseline};
  state.boards.default = payload;
  if (!state.controller) hideProgress();
  setMeta(payload);
  if (state.view === "default") render();
}

async function runCustom() {
  const spec = readForm();
  const problem = validate(spec);
  showError(problem);
  if (problem) return;
  writeURL(spec);
  if (state.controller) state.controller.abort();
  if (state.refine.view === "custom") stopRefinement();
  if (!isCustom(spec) && state.boards.default) {     // nothing customised: that is the default board
    state.controller = null;
    setView("default");
    return;
  }
  const controller = new AbortController();
  state.controller = controller;
  const clickedAt = performance.now();
  state.clickedAt = clickedAt;
  $("rank-btn").classList.add("busy");
  $("rank-btn").textContent = "Ranking…";
  showProgress({done: 0, total: 0});
  try {
    let payload = null;
    payload = await streamBoard(spec, controller.signal, showProgress, (event, late) => {
      if (!payload) return;
      const shown = state.boards.custom === payload && state.view === "custom";
      if (event === "warnings") {
        payload.warnings = late.warnings;
        if (shown) renderWarnings([...payload.warnings, ...(payload.versionWarnings || [])]);
      } else {
        payload.leaderboard.criteria_breakdown = late.criteria_breakdown;
        payload.leaderboard.criteria_contribution = late.criteria_contribution;
        payload.breakdownPending = false;
        payload.breakdownError = late.error || null;
        if (shown) renderBreakdown(payload);
        window.uslLastBreakdownMs = performance.now() - clickedAt;
      }
    });
    payload.breakdownPending = spec.likes.length + spec.avoid.length >= 2
      && Object.keys(payload.leaderboard.criteria_breakdown || {}).length === 0;
    if (state.controller !== controller) return;     // a newer request took over
    forgetRefinement("custom");                      // a new fast board: refining starts afresh
    state.boards.custom = payload;
    spec.judge = spec.judge || payload.leaderboard.spec.judge;
    spec.benchmark = spec.benchmark || payload.leaderboard.spec.benchmark;
    state.specs.custom = spec;
    payload.versionWarnings = versionWarnings(payload);
    writeURL(spec, boardVersions(payload));     // now with the benchmark, judge and versions that made this board
    $("tab-custom").disabled = false;
    setView("custom");
  } catch (e) {
    if (e.name === "AbortError") return;
    showError(e.message);
  } finally {
    if (state.controller === controller) {
      state.controller = null;
      hideProgress();
      $("rank-btn").classList.remove("busy");
      $("rank-btn").textContent = "Rank models";
    }
  }
}

// What the built-in judge specs are, for the judge selector (other specs show as written).
const JUDGE_LABELS = {
  "default": "default (fast CRM)",
  "crm-factored": "crm-factored (transformer CRM, stored answer vectors)",
  "crm": "crm (transformer CRM; slow on a CPU)",
};

function setMeta(payload) {
  const s = payload.leaderboard.spec;
  $("meta-benchmark").textContent = s.benchmark || "–";
  $("meta-judge").textContent = s.judge || "–";
  // The shared URL names the benchmark and judge, so it reproduces the ranking even where the
  // server's defaults differ.
  state.base.benchmark = state.base.benchmark || s.benchmark;
  state.base.judge = state.base.judge || s.judge;
  for (const [key, options] of [["benchmark", state.config.benchmarks], ["judge", state.config.judges]]) {
    if (options.length < 2) continue;
    const sel = $(`${key}-select`);
    sel.replaceChildren(...options.map((o) => el("option", {value: o, text: (key === "judge" && JUDGE_LABELS[o]) || o})));
    sel.value = s[key];
    sel.hidden = false;
    $(`meta-${key}`).hidden = true;
  }
  $("meta-baseline").textContent = s.baseline || "the benchmark's";
}

function setView(view) {
  state.view = view;
  for (const t of document.querySelectorAll(".tabs [role=tab]")) t.setAttribute("aria-selected", String(t.dataset.view === view));
  render();
}

// ---- refinement by the reference CRM --------------------------------------------------------

// Judged questions before the refined board replaces the fast one: from 5 on it is closer to the
// reference's whole board than the fast board on most criteria sets (15 of 24 measured; 19 at 10;
// docs/log.md, "progressive refinement"). With 2 it is a coin flip (10 of 24).
const REFINE_SHOW_AFTER = 5;

function renderRefineBar() {
  const ref = state.config && state.config.reference;
  const bar = $("refine-bar");
  bar.hidden = !ref || !state.boards[state.view];
  if (bar.hidden) return;
  const running = state.refine.controller !== null && state.refine.view === state.view;
  $("refine-btn").textContent = running ? "Stop refining" : `Refine with ${ref}`;
  $("refine-status").textContent = state.refine.status[state.view] || "";
}

function setRefineStatus(view, text) {
  state.refine.status[view] = text;
  if (state.view === view) renderRefineBar();
}

function stopRefinement() {
  if (state.refine.controller) state.refine.controller.abort();
  state.refine.controller = null;
  renderRefineBar();
}

// A new board for this view: its refinement (if any) is over and its fast board is the new one.
function forgetRefinement(view) {
  if (state.refine.view === view) stopRefinement();
  state.refine.fast[view] = null;
  state.refine.status[view] = "";
}

function toggleRefinement() {
  const view = state.view;
  const mine = state.refine.controller !== null && state.refine.view === view;
  stopRefinement();
  if (!mine) refine(view);
}

async function refine(view) {
  const fast = state.refine.fast[view] || state.boards[view];
  state.refine.fast[view] = fast;
  const controller = new AbortController();
  state.refine.controller = controller;
  state.refine.view = view;
  const t0 = performance.now();
  const ref = state.config.reference;
  let last = null;
  setRefineStatus(view, `Refining with ${ref}…`);
  try {
    const res = await fetch("/api/leaderboard/refine?" + fast.query, {signal: controller.signal});
    if (!res.ok) throw new Error(await errorText(res));
    for await (const [event, obj] of sseEvents(res)) {
      if (state.refine.controller !== controller) break;     // stopped: buffered events are stale
      if (event === "error") throw new Error(obj.message || "refinement failed");
      if (event !== "refined") continue;
      const r = obj.leaderboard.spec.refinement;
      last = r;
      const shown = r.complete || r.queries_judged >= REFINE_SHOW_AFTER;
      const secs = fmt((performance.now() - t0) / 1000, 0);
      setRefineStatus(view, `${r.complete ? "Refined" : "Refining"} with ${ref}: ${r.queries_judged} of ${r.queries} ` +
        `questions judged · ${secs} s` + (shown ? (r.complete ? "" : " · the rest estimated from the fast judge")
                                              : ` · its board replaces this one from ${REFINE_SHOW_AFTER}`));
      if (!shown) continue;
      // The per-criterion breakdown and timing stay the fast judge's: the refined board has none.
      obj.leaderboard.criteria_breakdown = fast.leaderboard.criteria_breakdown;
      obj.leaderboard.criteria_contribution = fast.leaderboard.criteria_contribution;
      obj.elapsed_s = fast.elapsed_s;
      obj.warnings = [...(fast.warnings || []).filter((w) => !obj.warnings.includes(w)), ...obj.warnings];
      state.boards[view] = obj;
      if (state.view === view) render();
    }
  } catch (e) {
    if (e.name !== "AbortError") setRefineStatus(view, `Refinement stopped: ${e.message}`);
  } finally {
    if (state.refine.controller === controller) {
      state.refine.controller = null;
      renderRefineBar();
    }
    // Stopped by the user (not by a new board, which forgets the refinement): say where it stands.
    if (controller.signal.aborted && state.refine.fast[view] === fast) {
      setRefineStatus(view, last ? `Stopped with ${last.queries_judged} of ${last.queries} questions judged by ` +
        `${ref} (kept: refine again to go on)` : "");
    }
  }
}

// ---- rendering ------------------------------------------------------------------------------

function render() {
  const payload = state.boards[state.view];
  if (!payload) return;
  const custom = state.view === "custom";
  const spec = state.specs[state.view];
  $("board-title").textContent = custom ? "Your leaderboard" : "Default leaderboard";
  $("board-sub").textContent = describe(payload, spec, custom);
  renderWarnings(custom ? [...payload.warnings, ...(payload.versionWarnings || [])] : []);
  renderReading(custom ? payload.leaderboard.criteria_reading || [] : []);
  renderSummary(custom ? payload : null);
  renderTable(payload, custom);
  // A refined board exports as refined (the server's estimate from what its reference has judged).
  const refinedExport = payload.leaderboard.spec.refinement ? "&refined=true" : "";
  $("export-csv").href = "/api/export.csv?" + payload.query + refinedExport;
  $("export-json").href = "/api/export.json?" + payload.query + refinedExport;
  $("custom-extras").hidden = !custom;
  if (custom) {
    renderPlot(payload);
    renderBreakdown(payload);
  }
  renderModelChoice(payload);
  renderRefineBar();
  afterPaint(() => {
    const table = $("leaderboard");
    state.renderSeq += 1;
    table.dataset.view = state.view;
    table.dataset.renderSeq = String(state.renderSeq);
    if (custom && state.clickedAt !== null) {
      window.uslLastRenderMs = performance.now() - state.clickedAt;
      state.clickedAt = null;
    }
  });
}

function afterPaint(fn) { requestAnimationFrame(() => requestAnimationFrame(fn)); }

function describe(payload, spec, custom) {
  const rows = payload.leaderboard.rows;
  const n = rows.length ? Math.max(...rows.map((r) => r.n + r.n_missing)) : 0;
  const rf = payload.leaderboard.spec.refinement;
  const refined = rf ? ` · refined by ${rf.reference} (${rf.queries_judged}/${rf.queries} judged; CIs: Student t)` : "";
  if (!custom) return `General criteria · all topics · ${rows.length} models · ${n} questions${refined}`;
  const parts = [];
  const c = spec.likes.length + spec.avoid.length;
  parts.push(c ? `${c} criteria` : "general criteria");
  parts.push(spec.topics.length ? `${spec.topics.length} topic${spec.topics.length > 1 ? "s" : ""}` : "all topics");
  if (spec.use_case) parts.push("use case");
  parts.push(`${rows.length} models · up to ${n} questions`);
  return parts.join(" · ") + refined;
}

function renderWarnings(list) {
  const ul = $("warnings");
  ul.replaceChildren(...list.map((w) => el("li", {text: w})));
  ul.hidden = list.length === 0;
}

// One line a criterion: its kind, the judge's measured accuracy on that kind, and a note where the
// kind is beyond this judge (facts and code it cannot verify).
function renderReading(list) {
  const items = list.map((r) => el("li", {dataset: {kind: r.kind}},
    el("strong", {text: r.kind}), " ",
    r.accuracy === null ? "accuracy not measured" : `accuracy ${r.accuracy.toFixed(2)} on ${r.n} pairs`,
    ` · quality share ${r.quality_share.toFixed(2)} · `, el("span", {text: r.text}),
    r.note ? el("div", {className: "note", text: r.note}) : null));
  $("reading-list").replaceChildren(...items);
  $("reading").hidden = items.length === 0;
}

function renderSummary(payload) {
  const box = $("summary");
  if (!payload) { box.hidden = true; return; }
  const cmp = payload.comparison;
  const moved = cmp.placements.filter((p) => p.default_position !== null && p.default_position !== p.position).length;
  const refined = Boolean(payload.leaderboard.spec.refinement);
  box.replaceChildren(
    stat(refined ? "Kendall τ vs default (fast judge)" : "Kendall τ vs default", fmt(cmp.kendall_tau, 2)),
    stat("Spearman ρ", fmt(cmp.spearman_rho, 2)),
    stat("Models that moved", `${moved} / ${cmp.placements.length}`),
    stat("Computed in", `${fmt(payload.elapsed_s, 2)} s`),
  );
  box.hidden = false;
}

function stat(label, value) {
  return el("div", {className: "stat"}, el("div", {className: "stat-value", text: value}), el("div", {className: "stat-label", text: label}));
}

function topicColumns(rows) {
  const present = new Set(rows.flatMap((r) => Object.keys(r.topics || {})));
  const ordered = state.topics.map((t) => t.name).filter((n) => present.has(n));
  for (const n of [...present].sort()) if (!ordered.includes(n)) ordered.push(n);
  return ordered;
}

function renderTable(payload, custom) {
  const rows = [...payload.leaderboard.rows].sort((a, b) => a.rank - b.rank || b.win_rate - a.win_rate || a.model.localeCompare(b.model));
  const place = new Map(payload.comparison.placements.map((p) => [p.model, p]));
  const topics = topicColumns(rows);
  const lo = Math.min(...rows.map((r) => r.ci[0]), 50), hi = Math.max(...rows.map((r) => r.ci[1]), 50);
  const scale = {lo: Math.max(0, lo - 2), hi: Math.min(100, hi + 2)};

  const head = el("tr", {},
    el("th", {text: "Rank", className: "num rank", scope: "col",
              title: "1 + the number of models significantly better (whose 95% CI lies wholly above this model's)"}),
    el("th", {text: "Model", className: "model", scope: "col"}),
    el("th", {text: "Win rate (95% CI)", className: "wr", scope: "col"}),
    el("th", {text: "LC", className: "num lc", scope: "col", title: lcTitle(payload.leaderboard.spec)}),
    custom ? el("th", {text: "vs default", className: "num", scope: "col", title: "Change in position vs the default leaderboard"}) : null,
    ...topics.map((t) => el("th", {className: "num topic", scope: "col", title: t}, short(t, 40))),
    el("th", {text: "Avg. words", className: "num", scope: "col", title: "Average answer length, words"}),
    el("th", {text: "Answers", className: "num", scope: "col", title: "Questions answered (missing ones are not counted as losses)"}),
  );
  const body = rows.map((r) => {
    const p = place.get(r.model);
    const tr = el("tr", {dataset: {model: r.model}, tabindex: 0, title: "Show example answers"},
      el("td", {className: "num rank", text: r.rank}),
      el("td", {className: "model", text: r.model}),
      el("td", {className: "wr"}, el("div", {className: "wr-cell"},
        el("span", {className: "wr-num", text: fmt(r.win_rate)}), whisker(r, scale),
        el("span", {className: "ci muted", text: `${fmt(r.ci[0])}–${fmt(r.ci[1])}`}))),
      el("td", {className: "num lc", text: r.lc_win_rate === null || r.lc_win_rate === undefined ? "off" : fmt(r.lc_win_rate)}),
      custom ? el("td", {className: "num"}, delta(p)) : null,
      ...topics.map((t) => heatCell(r.topics[t])),
      el("td", {className: "num", text: fmt(r.avg_length, 0)}),
      el("td", {className: "num", title: r.n_missing ? `${r.n} answered, ${r.n_missing} without an answer (not counted as losses)` : null},
        String(r.n), r.n_missing ? el("span", {className: "muted small", text: ` of ${r.n + r.n_missing}`}) : null),
    );
    tr.addEventListener("click", () => showExamples(r.model));
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") showExamples(r.model); });
    return tr;
  });
  const table = $("leaderboard");
  table.tHead.replaceChildren(head);
  table.tBodies[0].replaceChildren(...body);
  const note = rankNote(rows);
  $("rank-note").textContent = note;
  $("rank-note").hidden = !note;
}

// The length-controlled win rate, as `usl rank` shows it: off where the criteria are about length (or the
// board is refined), with the engine's reason.
function lcTitle(spec) {
  const why = spec && typeof spec.length_control === "string" && spec.length_control.startsWith("off")
    ? ` Off for this board: ${spec.length_control.replace(/^off:?\s*/, "")}.` : "";
  return "Length-controlled win rate: the win rate predicted at equal answer length (as AlpacaEval-LC)." + why;
}

// Rank is 1 + the number of models whose 95% CI lies wholly above this one's, so a model with a slightly
// higher win rate but an interval that reaches less high can have more models counted above it, and a worse
// rank. Rows are sorted by rank, so such a pair looks out of order: say why, with the board's own first case.
function rankNote(rows) {
  for (const a of rows) {
    const b = rows.find((x) => x.win_rate < a.win_rate && x.rank < a.rank);
    if (b) {
      return `Why is ${a.model} (${fmt(a.win_rate)}%, rank ${a.rank}) below ${b.model} (${fmt(b.win_rate)}%, rank ${b.rank})? ` +
        `A rank counts the models significantly better, those whose 95% CI lies wholly above the model's own: ` +
        `${b.model}'s interval reaches higher (${fmt(b.ci[0])}–${fmt(b.ci[1])} against ${fmt(a.ci[0])}–${fmt(a.ci[1])}), ` +
        `so fewer models clear it. The two are not significantly different from each other.`;
    }
  }
  return "";
}

function short(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }

function delta(p) {
  if (!p || p.default_position === null) return el("span", {className: "muted", text: "new"});
  const d = p.default_position - p.position;
  if (d === 0) return el("span", {className: "muted", text: "="});
  return el("span", {className: d > 0 ? "up" : "down", text: d > 0 ? `▲ ${d}` : `▼ ${-d}`});
}

function whisker(r, scale) {
  const w = 96, h = 16, pad = 5, x = (v) => pad + ((v - scale.lo) / (scale.hi - scale.lo || 1)) * (w - 2 * pad);
  const s = svgEl("svg", {width: w, height: h, viewBox: `0 0 ${w} ${h}`, class: "whisker", role: "img",
                          "aria-label": `95% CI ${fmt(r.ci[0])} to ${fmt(r.ci[1])}`});
  s.append(
    svgEl("line", {x1: x(50), x2: x(50), y1: 1, y2: h - 1, class: "ref"}),
    svgEl("line", {x1: x(r.ci[0]), x2: x(r.ci[1]), y1: h / 2, y2: h / 2, class: "ci-line"}),
    svgEl("line", {x1: x(r.ci[0]), x2: x(r.ci[0]), y1: 4, y2: h - 4, class: "ci-line"}),
    svgEl("line", {x1: x(r.ci[1]), x2: x(r.ci[1]), y1: 4, y2: h - 4, class: "ci-line"}),
    svgEl("circle", {cx: x(r.win_rate), cy: h / 2, r: 3.5, class: "dot"}),
  );
  return s;
}

function heatCell(v) {
  const td = el("td", {className: "num heat", text: fmt(v)});
  if (v !== undefined && v !== null) {
    const a = Math.min(1, Math.abs(v - 50) / 50) * 0.55;
    td.style.backgroundColor = v >= 50 ? `rgba(37, 99, 235, ${a})` : `rgba(234, 88, 12, ${a})`;
  }
  return td;
}

function renderPlot(payload) {
  const ps = payload.comparison.placements.filter((p) => p.default_position !== null);
  const n = Math.max(2, ...ps.map((p) => Math.max(p.position, p.default_position, p.rank_high, p.default_rank_high)));
  const size = 440, m = {l: 48, r: 16, t: 16, b: 44}, inner = size - m.l - m.r;
  const pos = (rank) => ((rank - 1) / (n - 1)) * inner;     // rank 1 at the top-left
  const s = svgEl("svg", {viewBox: `0 0 ${size} ${size}`, class: "rank-plot", role: "img",
                          "aria-label": "Your rank against the default rank"});
  const g = svgEl("g", {transform: `translate(${m.l},${m.t})`});
  s.append(g);
  g.append(svgEl("rect", {x: 0, y: 0, width: inner, height: inner, class: "frame"}));
  const step = Math.max(1, Math.ceil(n / 10));
  for (let k = 1; k <= n; k += step) {
    g.append(svgEl("line", {x1: pos(k), x2: pos(k), y1: 0, y2: inner, class: "grid"}),
             svgEl("line", {x1: 0, x2: inner, y1: pos(k), y2: pos(k), class: "grid"}),
             svgEl("text", {x: pos(k), y: inner + 16, class: "tick", "text-anchor": "middle"}, String(k)),
             svgEl("text", {x: -8, y: pos(k) + 4, class: "tick", "text-anchor": "end"}, String(k)));
  }
  g.append(svgEl("line", {x1: 0, y1: 0, x2: inner, y2: inner, class: "diag"}),
           svgEl("text", {x: inner / 2, y: inner + 36, class: "axis", "text-anchor": "middle"}, "Default rank"),
           svgEl("text", {x: -inner / 2, y: -34, class: "axis", "text-anchor": "middle", transform: "rotate(-90)"}, "Your rank"));
  // Few models: label all. Many: label only the biggest movers, so the plot stays readable.
  const moves = ps.map((p) => Math.abs(p.default_position - p.position)).sort((a, b) => b - a);
  const cut = ps.length <= 16 ? -1 : Math.max(1, moves[Math.min(5, moves.length - 1)]);
  g.classList.toggle("many", ps.length > 16);
  for (const p of ps) {
    const label = Math.abs(p.default_position - p.position) > cut || (cut === -1);
    const x = pos(p.default_position), y = pos(p.position);
    const cls = p.position < p.default_position ? "up" : p.position > p.default_position ? "down" : "same";
    const pt = svgEl("g", {class: `pt ${cls}`, "data-model": p.model});
    pt.append(
      svgEl("line", {x1: pos(p.default_rank_low), x2: pos(p.default_rank_high), y1: y, y2: y, class: "wh"}),
      svgEl("line", {x1: x, x2: x, y1: pos(p.rank_low), y2: pos(p.rank_high), class: "wh"}),
      svgEl("circle", {cx: x, cy: y, r: 4.5}),
      svgEl("title", {}, `${p.model}: rank ${p.position} (CI ${p.rank_low}–${p.rank_high}), default ${p.default_position} (CI ${p.default_rank_low}–${p.default_rank_high})`),
    );
    if (label) {
      const right = x > inner * 0.7;      // keep labels near the right edge inside the frame
      pt.append(svgEl("text", {x: right ? x - 7 : x + 7, y: y - 6, class: "pt-label",
                               "text-anchor": right ? "end" : "start"}, short(p.model, 22)));
    }
    pt.addEventListener("click", () => showExamples(p.model));
    g.append(pt);
  }
  $("rank-plot").replaceChildren(s);
}

function renderBreakdown(payload) {
  const table = $("breakdown");
  const bd = payload.leaderboard.criteria_breakdown || {};
  const criteria = Object.keys(bd);
  if (criteria.length === 0) {
    const note = payload.breakdownPending ? "Judging each criterion alone…"
      : payload.breakdownError ? `The per-criterion boards failed: ${payload.breakdownError}`
      : "Give two or more criteria to see how each one ranks the models.";
    table.replaceChildren(el("tbody", {}, el("tr", {}, el("td", {className: "muted", text: note}))));
    table.dataset.state = payload.breakdownPending ? "pending" : "empty";
    return;
  }
  table.dataset.state = "ready";
  const order = payload.comparison.placements.map((p) => p.model);
  const share = payload.leaderboard.criteria_contribution || {};
  const head = el("thead", {}, el("tr", {}, el("th", {text: "Model", scope: "col"}),
    ...criteria.map((c) => el("th", {className: "num crit", scope: "col", title: c}, short(c, 24)))));
  const weights = Object.keys(share).length === 0 ? null : el("tr", {className: "share"},
    el("td", {text: "Share of your ranking", title: "Non-negative weights that best rebuild your win rates from the single-criterion ones"}),
    ...criteria.map((c) => el("td", {className: "num", text: share[c] === undefined ? "–" : `${Math.round(100 * share[c])}%`})));
  const body = el("tbody", {}, weights, ...order.map((m) => el("tr", {dataset: {model: m}},
    el("td", {className: "model", text: m}), ...criteria.map((c) => heatCell(bd[c][m])))));
  table.replaceChildren(head, body);
}

function renderModelChoice(payload) {
  const sel = $("example-model");
  const current = sel.value;
  const models = payload.comparison.placements.map((p) => p.model);
  sel.replaceChildren(...models.map((m) => el("option", {value: m, text: m})));
  if (models.includes(current)) sel.value = current;
}

// ---- examples -------------------------------------------------------------------------------

async function showExamples(model) {
  $("example-model").value = model;
  const spec = state.specs[state.view] || state.specs.default;
  const box = $("examples");
  box.replaceChildren(el("p", {className: "muted", text: `Loading examples for ${model}…`}));
  $("examples-card").scrollIntoView({behavior: "smooth", block: "start"});
  try {
    const p = toParams(spec);
    p.set("model", model);
    p.set("limit", "4");
    const data = await getJSON("/api/examples?" + p.toString());
    if (data.examples.length === 0) {
      box.replaceChildren(el("p", {className: "muted", text: "No examples for this model."}));
      return;
    }
    box.replaceChildren(el("p", {className: "muted small"}, "Criteria: ", data.criteria.join(" · ")),
                        ...data.examples.map(exampleCard));
  } catch (e) {
    box.replaceChildren(el("p", {className: "form-error", text: e.message}));
  }
}

function exampleCard(x) {
  const verdict = x.verdict === "model" ? "Judge prefers this model" : x.verdict === "baseline" ? "Judge prefers the baseline" : "Judge: tie";
  return el("article", {className: "example"},
    el("header", {},
      el("div", {className: "q"}, x.topic ? el("span", {className: "tag", text: x.topic}) : null, el("span", {text: x.query})),
      el("span", {className: `verdict ${x.verdict}`, title: `P(${x.model} better than ${x.baseline}) under your criteria`,
                  text: `${verdict} · P(model better) = ${fmt(x.p_model_wins, 2)}`})),
    el("div", {className: "pair"},
      answer(x.model, x.model_answer, x.verdict === "model"),
      answer(`${x.baseline} (baseline)`, x.baseline_answer, x.verdict === "baseline")));
}

function answer(who, text, won) {
  return el("div", {className: "answer" + (won ? " won" : "")}, el("h4", {text: who}), el("pre", {text}));
}

// ---- topics -------------------------------------------------------------------------------

function renderTopics() {
  const list = $("topic-list");
  list.replaceChildren(...state.topics.map((t) => el("label", {className: "topic", title: (t.keywords || []).join(", ")},
    el("input", {type: "checkbox", value: t.id, name: "topics"}),
    el("span", {text: t.name}),
    t.n_queries !== null && t.n_queries !== undefined ? el("span", {className: "muted count", text: t.n_queries}) : null)));
  if (state.topics.length === 0) list.append(el("p", {className: "muted", text: "No topics built for this benchmark."}));
}

// ---- wiring ---------------------------------------------------------------------------------

async function init() {
  $("spec-form").addEventListener("submit", (e) => { e.preventDefault(); runCustom(); });
  $("reset-btn").addEventListener("click", () => {
    if (state.controller) state.controller.abort();
    writeForm({likes: [], avoid: [], topics: [], use_case: ""});
    showError(null);
    writeURL({likes: [], avoid: [], topics: [], use_case: ""});
    forgetRefinement("custom");
    state.boards.custom = null;
    $("tab-custom").disabled = true;
    setView("default");
  });
  $("topics-all").addEventListener("click", () => { for (const c of document.querySelectorAll("#topic-list input")) c.checked = true; updateHints(); });
  $("topics-none").addEventListener("click", () => { for (const c of document.querySelectorAll("#topic-list input")) c.checked = false; updateHints(); });
  for (const id of ["likes", "avoid", "use-case"]) {
    $(id).addEventListener("input", updateHints);
    $(id).addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) runCustom(); });
  }
  $("topic-list").addEventListener("change", updateHints);
  for (const t of document.querySelectorAll(".tabs [role=tab]")) t.addEventListener("click", () => { if (!t.disabled) setView(t.dataset.view); });
  $("example-btn").addEventListener("click", () => { if ($("example-model").value) showExamples($("example-model").value); });
  $("copy-link").addEventListener("click", copyLink);
  $("refine-btn").addEventListener("click", toggleRefinement);
  for (const [id, key] of [["benchmark-select", "benchmark"], ["judge-select", "judge"]]) {
    $(id).addEventListener("change", () => {
      // Another benchmark has other topics: start from its default board. Another judge keeps
      // the criteria and ranks them again.
      const spec = key === "benchmark" ? {likes: [], avoid: [], topics: [], use_case: ""} : readForm();
      const p = toParams({...spec, judge: key === "judge" ? $(id).value : null,
                          benchmark: key === "benchmark" ? $(id).value : state.base.benchmark, baseline: null,
                          calibration: null});     // a calibration belongs to one judge and one benchmark
      location.search = "?" + p.toString();
    });
  }

  try {
    state.config = await getJSON("/api/config");
    for (const n of document.querySelectorAll(".lim-use-case")) n.textContent = state.config.limits.max_use_case_chars;
    $("use-case").maxLength = state.config.limits.max_use_case_chars;
    const urlSpec = specFromURL();
    const pinned = new URLSearchParams(location.search);
    state.pinned = {judge_version: pinned.get("judge_version"), data_version: pinned.get("data_version")};
    state.base = {judge: urlSpec.judge, benchmark: urlSpec.benchmark, baseline: urlSpec.baseline,
                  calibration: urlSpec.calibration};
    const benchmark = urlSpec.benchmark || state.config.benchmark;
    state.topics = await getJSON("/api/topics?benchmark=" + encodeURIComponent(benchmark)).catch(() => []);
    renderTopics();
    writeForm(urlSpec);
    const def = loadDefault(urlSpec);
    if (isCustom(urlSpec)) runCustom();
    await def;
  } catch (e) {
    showError(e.message);
    $("leaderboard").tBodies[0].replaceChildren(el("tr", {}, el("td", {className: "form-error", text: `Could not load the leaderboard: ${e.message}`})));
    hideProgress();
  }
}

async function copyLink() {
  const btn = $("copy-link");
  try {
    await navigator.clipboard.writeText(location.href);
    btn.textContent = "Copied";
  } catch (_) {
    window.prompt("Copy this link:", location.href);
  }
  setTimeout(() => { btn.textContent = "Copy link"; }, 1500);
}

document.addEventListener("DOMContentLoaded", init);
