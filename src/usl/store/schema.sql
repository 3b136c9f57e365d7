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
