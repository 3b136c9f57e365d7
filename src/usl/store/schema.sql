-- One file, one schema. Statements are idempotent; new tables are appended, never edited.
CREATE TABLE IF NOT EXISTS benchmarks (
  name TEXT PRIMARY KEY,
  baseline TEXT NOT NULL,
  version TEXT NOT NULL,
  source TEXT NOT NULL DEFAULT '',
  imported_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE TABLE IF NOT EXISTS queries (
  benchmark TEXT NOT NULL REFERENCES benchmarks(name) ON DELETE CASCADE,
  id TEXT NOT NULL,
  position INTEGER NOT NULL,
  text TEXT NOT NULL,
  source TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (benchmark, id)
);
CREATE TABLE IF NOT EXISTS models (
  benchmark TEXT NOT NULL REFERENCES benchmarks(name) ON DELETE CASCADE,
  name TEXT NOT NULL,
  PRIMARY KEY (benchmark, name)
);
CREATE TABLE IF NOT EXISTS responses (
  benchmark TEXT NOT NULL REFERENCES benchmarks(name) ON DELETE CASCADE,
  query_id TEXT NOT NULL,
  model TEXT NOT NULL,
  text TEXT NOT NULL,
  PRIMARY KEY (benchmark, query_id, model)
);
CREATE TABLE IF NOT EXISTS topics (
  benchmark TEXT NOT NULL REFERENCES benchmarks(name) ON DELETE CASCADE,
  id TEXT NOT NULL,
  name TEXT NOT NULL,
  keywords TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (benchmark, id)
);
CREATE TABLE IF NOT EXISTS query_topics (
  benchmark TEXT NOT NULL,
  query_id TEXT NOT NULL,
  topic_id TEXT NOT NULL,
  PRIMARY KEY (benchmark, query_id, topic_id)
);
-- One judge decision on one (model answer, baseline answer) pair in one presentation order.
-- The primary key is the whole cache key, so a judgment can never be stored twice; writers use
-- INSERT OR IGNORE and commit per batch, so a killed job loses at most its in-flight batch.
-- judge: identity name@version; criteria: Criteria.key() (sha256 of the canonical criteria);
-- swapped: 0 = model answer shown first, 1 = baseline first, 2 = both orders already averaged
-- by the judge (judge_matrix); content: 63-bit fingerprint of the query, model answer and
-- baseline answer texts, so a re-imported answer is judged afresh; p_a/p_tie: the Verdict.
CREATE TABLE IF NOT EXISTS judgments (
  judge TEXT NOT NULL,
  criteria TEXT NOT NULL,
  benchmark TEXT NOT NULL,
  baseline TEXT NOT NULL,
  model TEXT NOT NULL,
  query_id TEXT NOT NULL,
  swapped INTEGER NOT NULL CHECK (swapped IN (0, 1, 2)),
  content INTEGER NOT NULL,
  p_a REAL NOT NULL,
  p_tie REAL NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  PRIMARY KEY (judge, criteria, benchmark, baseline, model, query_id, swapped, content)
) WITHOUT ROWID;
-- A user's vote on one pair (a model's answer beside the baseline's) under their criteria, with the
-- texts as shown (an answer replaced later does not change what was voted on) and the judge's reading
-- at voting time. choice: which answer the user preferred; model_first: the model's answer was shown
-- on the left. criteria: JSON {"likes": [...], "avoid": [...]}.
CREATE TABLE IF NOT EXISTS votes (
  id INTEGER PRIMARY KEY,
  benchmark TEXT NOT NULL,
  query_id TEXT NOT NULL,
  query TEXT NOT NULL,
  model TEXT NOT NULL,
  model_answer TEXT NOT NULL,
  baseline TEXT NOT NULL,
  baseline_answer TEXT NOT NULL,
  criteria TEXT NOT NULL,
  choice TEXT NOT NULL CHECK (choice IN ('model', 'baseline', 'tie')),
  model_first INTEGER NOT NULL CHECK (model_first IN (0, 1)),
  judge TEXT NOT NULL,
  p_model REAL NOT NULL,
  created_at TEXT NOT NULL DEFAULT (datetime('now'))
);
-- A user's calibration of a judge (usl.judges.calibration), fitted on stored votes: the record's JSON
-- (judge identity, benchmark, criteria, terms, weights) and the votes it was fitted on. Deleting one of
-- those votes deletes the calibration (the trigger): weights never outlive the votes that made them.
CREATE TABLE IF NOT EXISTS calibrations (
  name TEXT PRIMARY KEY,
  benchmark TEXT NOT NULL,
  judge TEXT NOT NULL,
  record TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE TABLE IF NOT EXISTS calibration_votes (
  calibration TEXT NOT NULL REFERENCES calibrations(name) ON DELETE CASCADE,
  vote INTEGER NOT NULL REFERENCES votes(id) ON DELETE CASCADE,
  PRIMARY KEY (calibration, vote)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS votes_take_their_calibrations BEFORE DELETE ON votes BEGIN
  DELETE FROM calibrations WHERE name IN (SELECT calibration FROM calibration_votes WHERE vote = OLD.id);
END;
