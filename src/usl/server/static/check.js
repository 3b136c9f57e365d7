// "Check the judge on your taste": 10 pairs from the chosen topics under the chosen criteria, the
// user's votes, and the judge's agreement with them (POST /api/check/votes); then "my calibrated judge":
// a calibration fitted on the votes (POST /api/check/calibrate), its agreement before and after by
// leave-one-out, the models it moved, and the board under it (state.base.calibration). Uses app.js's
// functions ($, el, readForm, toParams, errorText, fmt, runCustom), loaded before this file.
"use strict";

const check = {spec: null, pairs: [], votes: new Map()};
const CALIBRATION = "mine";

function checkError(text) {
  $("check-error").hidden = !text;
  $("check-error").textContent = text || "";
}

async function startCheck() {
  checkError("");
  $("check-result").hidden = true;
  check.spec = {...readForm(), calibration: null};
  check.votes = new Map();
  $("check-pairs").replaceChildren(el("p", {className: "muted", text: "Picking pairs…"}));
  try {
    const res = await fetch("/api/check/pairs?" + toParams(check.spec).toString() + "&n=10",
                            {headers: {Accept: "application/json"}});
    if (!res.ok) throw new Error(await errorText(res));
    check.pairs = await res.json();
  } catch (e) {
    $("check-pairs").replaceChildren();
    checkError(e.message);
    return;
  }
  $("check-pairs").replaceChildren(...check.pairs.map(pairCard));
  $("check-done").hidden = false;
  updateDone();
}

function pairCard(p, i) {
  const choose = (choice) => {
    check.votes.set(i, choice);
    for (const b of card.querySelectorAll("button.vote")) b.setAttribute("aria-pressed", String(b.dataset.choice === choice));
    updateDone();
  };
  const button = (choice, text) => {
    const b = el("button", {type: "button", className: "vote", dataset: {choice}, "aria-pressed": "false", text});
    b.addEventListener("click", () => choose(choice));
    return b;
  };
  const card = el("article", {className: "example check-pair", dataset: {index: i, query: p.query_id}},
    el("header", {}, el("div", {className: "q"}, p.topic ? el("span", {className: "tag", text: p.topic}) : null,
                                el("span", {text: p.query}))),
    el("div", {className: "pair"},
      el("div", {className: "answer"}, el("h4", {text: "A"}), el("pre", {text: p.left})),
      el("div", {className: "answer"}, el("h4", {text: "B"}), el("pre", {text: p.right}))),
    el("div", {className: "vote-row"}, button("left", "A is better"), button("tie", "About the same"),
       button("right", "B is better")));
  return card;
}

function updateDone() {
  $("check-done").disabled = check.votes.size === 0;
  $("check-done").textContent = `See agreement (${check.votes.size} of ${check.pairs.length} voted)`;
}

async function finishCheck() {
  checkError("");
  const votes = [...check.votes].map(([i, choice]) => ({query_id: check.pairs[i].query_id, model: check.pairs[i].model,
                                                       model_first: check.pairs[i].model_first, choice}));
  const spec = checkSpec();
  let out;
  try {
    const res = await fetch("/api/check/votes", {method: "POST", headers: {"Content-Type": "application/json"},
                                                 body: JSON.stringify({spec, votes})});
    if (!res.ok) throw new Error(await errorText(res));
    out = await res.json();
  } catch (e) {
    checkError(e.message);
    return;
  }
  renderCheck(out);
}

function agreementText(a) {
  if (a.rate === null) return "no decided vote";
  return `${fmt(100 * a.rate, 0)}% (${a.agree} of ${a.decided}; 95% CI ${fmt(100 * a.ci[0], 0)}–${fmt(100 * a.ci[1], 0)}%)`;
}

function renderCheck(out) {
  const box = $("check-result");
  const items = [el("p", {id: "check-agreement", dataset: {rate: out.agreement.rate ?? ""}},
                    el("strong", {text: "The judge agrees with you on " + agreementText(out.agreement)}),
                    out.agreement.ties ? ` · ${out.agreement.ties} tie(s) left out` : "")];
  const per = Object.entries(out.per_criterion);
  if (per.length) {
    items.push(el("ul", {id: "check-per-criterion"},
      ...per.map(([c, a]) => el("li", {}, el("span", {text: c}), ": ", agreementText(a)))));
  }
  if (out.suggestion) items.push(el("p", {id: "check-suggestion"}, "Your votes suggest a criterion you did not write: ",
                                    el("em", {text: out.suggestion})));
  box.replaceChildren(...items);
  box.hidden = false;
  $("check-calibrate-row").hidden = false;
  const disagree = new Set(out.disagreements.map((d) => `${d.query_id}|${d.model}`));
  for (const card of document.querySelectorAll("#check-pairs .check-pair")) {
    const p = check.pairs[Number(card.dataset.index)];
    card.classList.toggle("disagree", disagree.has(`${p.query_id}|${p.model}`));
    if (disagree.has(`${p.query_id}|${p.model}`)) card.title = "The judge preferred the other answer";
  }
}

function checkSpec() {
  const spec = {likes: check.spec.likes, avoid: check.spec.avoid, topics: check.spec.topics, use_case: check.spec.use_case};
  for (const k of ["judge", "benchmark", "baseline"]) if (check.spec[k]) spec[k] = check.spec[k];
  return spec;
}

async function calibrate() {
  checkError("");
  $("check-calibrate").disabled = true;
  $("check-calibration").replaceChildren(el("p", {className: "muted", text: "Fitting the judge to your votes…"}));
  $("check-calibration").hidden = false;
  let out;
  try {
    const res = await fetch("/api/check/calibrate", {method: "POST", headers: {"Content-Type": "application/json"},
                                                     body: JSON.stringify({spec: checkSpec(), name: CALIBRATION})});
    if (!res.ok) throw new Error(await errorText(res));
    out = await res.json();
  } catch (e) {
    $("check-calibration").hidden = true;
    checkError(e.message);
    return;
  } finally {
    $("check-calibrate").disabled = false;
  }
  renderCalibration(out);
  $("use-calibration").disabled = false;
}

function renderCalibration(out) {
  const pct = (x) => x === null ? "–" : fmt(100 * x, 0) + "%";
  const moved = out.moved.filter((m) => m.before !== m.after).slice(0, 8);
  $("check-calibration").replaceChildren(
    el("p", {id: "calibration-agreement"}, el("strong", {text:
      `Your calibrated judge agrees with ${pct(out.after)} of your ${out.votes} votes, the shipped judge with ${pct(out.before)}`}),
      " (each vote predicted from the others, never from itself)."),
    el("ul", {id: "calibration-terms"}, ...out.terms.map((t) =>
      el("li", {}, el("span", {text: t.term}), `: ${fmt(t.shipped, 2)} → ${fmt(t.fitted, 2)}`))),
    moved.length ? el("p", {id: "calibration-moved"}, "Moved most: ",
      moved.map((m) => `${m.model} ${m.before} → ${m.after}`).join("; ")) : el("p", {text: "No model changed place."}));
}

function useCalibration() {
  state.base.calibration = $("use-calibration").checked ? CALIBRATION : null;
  if ($("use-calibration").checked) writeForm(check.spec);    // the criteria it was fitted under
  runCustom();
}

async function forgetVotes() {
  checkError("");
  const res = await fetch("/api/check/votes", {method: "DELETE"});
  if (!res.ok) { checkError(await errorText(res)); return; }
  const out = await res.json();
  $("use-calibration").checked = false;
  $("use-calibration").disabled = true;
  $("check-calibration").replaceChildren(el("p", {text: `Deleted ${out.votes} votes` +
    (out.calibrations.length ? " and your calibrated judge." : ".")}));
  $("check-calibration").hidden = false;
  if (state.base.calibration) { state.base.calibration = null; runCustom(); }
}

document.addEventListener("DOMContentLoaded", () => {
  $("check-start").addEventListener("click", startCheck);
  $("check-done").addEventListener("click", finishCheck);
  $("check-calibrate").addEventListener("click", calibrate);
  $("use-calibration").addEventListener("change", useCalibration);
  $("check-forget").addEventListener("click", forgetVotes);
});
