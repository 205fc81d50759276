-- Server instances and their heartbeats, as on PostgreSQL and MySQL, so one text of
-- the statements serves every backend. One process owns a SQLite file: nothing
-- beats here, and the table stays empty.
CREATE TABLE instances (
    instance TEXT PRIMARY KEY,
    beat_at  INTEGER NOT NULL
);
