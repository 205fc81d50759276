//! The SQL dialects, and the one text of a statement that every backend runs.
//!
//! A statement the backends write alike is written once, with `$1`, `$2`, … for its
//! parameters and a few `@` words where the dialects spell a clause differently:
//!
//! | word           | PostgreSQL               | MariaDB / MySQL          | SQLite (one writer) |
//! |----------------|--------------------------|--------------------------|---------------------|
//! | `@FOR_UPDATE`  | `FOR UPDATE`             | `FOR UPDATE`             | nothing             |
//! | `@FOR_SHARE`   | `FOR SHARE`              | `LOCK IN SHARE MODE`     | nothing             |
//! | `@SKIP_LOCKED` | `FOR UPDATE SKIP LOCKED` | `FOR UPDATE SKIP LOCKED` | nothing             |
//! | `@GREATEST`    | `GREATEST`               | `GREATEST`               | `MAX`               |
//! | `@LEAST`       | `LEAST`                  | `LEAST`                  | `MIN`               |
//! | `@IGNORE_DUPLICATE` | `ON CONFLICT DO NOTHING` | nothing (see below) | `ON CONFLICT DO NOTHING` |
//!
//! and three that take the columns (or index) they are about, for what MySQL
//! spells another way (PostgreSQL and SQLite alike):
//!
//! | word                     | PostgreSQL, SQLite                   | MariaDB / MySQL                     |
//! |--------------------------|--------------------------------------|-------------------------------------|
//! | `@UPSERT(a, b)`          | `ON CONFLICT (a, b) DO UPDATE SET`   | `ON DUPLICATE KEY UPDATE`           |
//! | `@NEW(c)`                | `EXCLUDED.c`                         | `VALUES(c)`                         |
//! | `@FORCE_INDEX(i)`        | nothing                              | `FORCE INDEX (i)`                   |
//!
//! `@FORCE_INDEX` is for a locking read (`@SKIP_LOCKED`) whose plan decides what
//! it locks: InnoDB locks each row the plan reads, not only those it returns, so a
//! claim planned on another index (MariaDB picks `(status, …)` with a filesort)
//! would lock, and make others skip, the pending rows of every agent.
//!
//! MySQL's upsert acts on a conflict with any unique key (name the one you mean in
//! `@UPSERT` for the others). Its `ON DUPLICATE KEY UPDATE c = c` counts a duplicate
//! left alone as a *found* row, and `INSERT IGNORE` turns every error (a value too
//! long, a NULL) into a warning, so neither tells an insert from a duplicate: on
//! MySQL an `@IGNORE_DUPLICATE` insert is a plain insert whose duplicate-key error
//! [`inserted`] answers as "not inserted". InnoDB rolls back only that statement,
//! so the transaction goes on, as after `ON CONFLICT DO NOTHING`.
//!
//! SQLite needs no row locks: its single writer serializes every write transaction.
//! MySQL's parameters are `?`; its text numbers them by position, so a shared
//! statement uses each of `$1..$n` once, in order (checked when it is rendered).
//!
//! [`sql!`] renders a statement once per dialect and keeps it for the process.

use std::sync::OnceLock;

/// The SQL a backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
    MySql,
}

impl Dialect {
    /// Whether `UPDATE … RETURNING` exists (SQLite 3.35+, PostgreSQL; not MySQL or
    /// MariaDB), so a driver default can take the one-statement shape.
    pub(crate) const fn update_returning(self) -> bool {
        !matches!(self, Self::MySql)
    }

    /// Whether one process owns the database (SQLite: the single writer of its
    /// file, behind its lock file), so an idempotency key in flight at start
    /// belongs to a process that is gone: its transaction never committed, and
    /// `idem_recover` forgets it. On a database that other instances share, their
    /// in-flight keys are live; an abandoned key is taken over once its lock runs
    /// out (phase 1).
    pub(crate) const fn sole_owner(self) -> bool {
        matches!(self, Self::Sqlite)
    }

    /// `template` in this dialect.
    pub(crate) fn render(self, template: &str) -> String {
        let words: [(&str, &str); 6] = match self {
            Self::Sqlite => [
                ("@IGNORE_DUPLICATE", "ON CONFLICT DO NOTHING"),
                ("@FOR_UPDATE", ""),
                ("@FOR_SHARE", ""),
                ("@SKIP_LOCKED", ""),
                ("@GREATEST", "MAX"),
                ("@LEAST", "MIN"),
            ],
            Self::Postgres => [
                ("@IGNORE_DUPLICATE", "ON CONFLICT DO NOTHING"),
                ("@FOR_UPDATE", "FOR UPDATE"),
                ("@FOR_SHARE", "FOR SHARE"),
                ("@SKIP_LOCKED", "FOR UPDATE SKIP LOCKED"),
                ("@GREATEST", "GREATEST"),
                ("@LEAST", "LEAST"),
            ],
            Self::MySql => [
                ("@IGNORE_DUPLICATE", ""),
                ("@FOR_UPDATE", "FOR UPDATE"),
                ("@FOR_SHARE", "LOCK IN SHARE MODE"),
                ("@SKIP_LOCKED", "FOR UPDATE SKIP LOCKED"),
                ("@GREATEST", "GREATEST"),
                ("@LEAST", "LEAST"),
            ],
        };
        let mut sql = self.spell_calls(template);
        for (word, spelling) in words {
            sql = sql.replace(word, spelling);
        }
        assert!(
            !sql.contains('@'),
            "unknown @ word in a shared statement: {template}"
        );
        match self {
            Self::MySql => positional(&sql),
            _ => sql,
        }
    }
}

impl Dialect {
    /// The words that take columns (`@NEW(c)`), spelled out.
    fn spell_calls(self, template: &str) -> String {
        let mut sql = template.to_owned();
        for word in ["@UPSERT(", "@NEW(", "@FORCE_INDEX("] {
            while let Some(start) = sql.find(word) {
                let open = start + word.len();
                let close = open
                    + sql[open..]
                        .find(')')
                        .unwrap_or_else(|| panic!("{word} without its `)`: {template}"));
                let cols = sql[open..close].trim();
                let spelled = match (word, self) {
                    ("@UPSERT(", Self::MySql) => "ON DUPLICATE KEY UPDATE".to_owned(),
                    ("@UPSERT(", _) => format!("ON CONFLICT ({cols}) DO UPDATE SET"),
                    ("@FORCE_INDEX(", Self::MySql) => format!("FORCE INDEX ({cols})"),
                    ("@FORCE_INDEX(", _) => String::new(),
                    (_, Self::MySql) => format!("VALUES({cols})"),
                    _ => format!("EXCLUDED.{cols}"),
                };
                sql.replace_range(start..=close, &spelled);
            }
        }
        sql
    }
}

/// `$1 … $n` as `?`, checking that each stands once and in order: MySQL binds by
/// position, so any other use would bind the wrong values.
fn positional(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut next = 1u32;
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let mut n = 0u32;
        while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
            n = n * 10 + d;
            chars.next();
        }
        assert_eq!(
            n, next,
            "a shared statement must use $1..$n once each, in order: {sql}"
        );
        next += 1;
        out.push('?');
    }
    out
}

/// Begins a read-only transaction that reads one snapshot on MySQL: the sessions
/// run at READ COMMITTED (each statement its own snapshot), so the next
/// transaction alone is raised to REPEATABLE READ, whose consistent snapshot is
/// taken at once.
pub(crate) const MYSQL_READ_SNAPSHOT: &str = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; \
     START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY";

/// Whether an `@IGNORE_DUPLICATE` insert added its row, from what `execute` gave
/// (`.map(|done| done.rows_affected())`): on MySQL a duplicate is a unique-key
/// error that only ended the statement.
pub(crate) fn inserted(done: Result<u64, sqlx::Error>) -> crate::StoreResult<bool> {
    match done {
        Ok(rows) => Ok(rows > 0),
        Err(sqlx::Error::Database(db)) if db.is_unique_violation() => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// One statement's text per dialect, rendered on first use.
pub(crate) struct Rendered([OnceLock<&'static str>; 3]);

impl Rendered {
    pub(crate) const fn new() -> Self {
        Self([OnceLock::new(), OnceLock::new(), OnceLock::new()])
    }

    pub(crate) fn get(&self, dialect: Dialect, template: impl FnOnce() -> String) -> &'static str {
        self.0[dialect as usize]
            .get_or_init(|| Box::leak(dialect.render(&template()).into_boxed_str()))
    }
}

/// A shared statement's text in `dialect`: `sql!(dialect, "SELECT … {COLS} … $1")`
/// (the template is `format!` text, so column lists may be named constants).
/// `n` rows of `columns` parameters each for a multi-row `VALUES`:
/// `($1, $2), ($3, $4)` for 2 rows of 2 (each parameter once, in order, as MySQL
/// needs).
pub(crate) fn value_rows(n: usize, columns: usize) -> String {
    (0..n)
        .map(|row| {
            let params: Vec<String> = (1..=columns)
                .map(|c| format!("${}", row * columns + c))
                .collect();
            format!("({})", params.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

macro_rules! sql {
    ($dialect:expr, $($template:tt)+) => {{
        static RENDERED: $crate::dialect::Rendered = $crate::dialect::Rendered::new();
        RENDERED.get($dialect, || format!($($template)+))
    }};
}
pub(crate) use sql;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_rows_number_each_parameter_once_in_order() {
        assert_eq!(value_rows(1, 3), "($1, $2, $3)");
        assert_eq!(value_rows(2, 2), "($1, $2), ($3, $4)");
        let rendered = Dialect::MySql.render(&format!("INSERT INTO t VALUES {}", value_rows(3, 2)));
        assert_eq!(rendered, "INSERT INTO t VALUES (?, ?), (?, ?), (?, ?)");
    }

    #[test]
    fn words_and_parameters_per_dialect() {
        let t = "SELECT fence FROM memories WHERE id = $1 AND fence < $2 @FOR_UPDATE";
        assert_eq!(
            Dialect::Sqlite.render(t),
            "SELECT fence FROM memories WHERE id = $1 AND fence < $2 "
        );
        assert_eq!(
            Dialect::Postgres.render(t),
            "SELECT fence FROM memories WHERE id = $1 AND fence < $2 FOR UPDATE"
        );
        assert_eq!(
            Dialect::MySql.render(t),
            "SELECT fence FROM memories WHERE id = ? AND fence < ? FOR UPDATE"
        );
        assert_eq!(
            Dialect::Sqlite.render("SET f = @GREATEST(f, $1)"),
            "SET f = MAX(f, $1)"
        );
    }

    #[test]
    fn inserts_that_meet_a_duplicate() {
        let ignore = "INSERT INTO s (m, a) VALUES ($1, $2) @IGNORE_DUPLICATE";
        assert_eq!(
            Dialect::Postgres.render(ignore),
            "INSERT INTO s (m, a) VALUES ($1, $2) ON CONFLICT DO NOTHING"
        );
        assert_eq!(
            Dialect::MySql.render(ignore),
            "INSERT INTO s (m, a) VALUES (?, ?) "
        );
        let upsert = "INSERT INTO r (m, \"key\", v) VALUES ($1, $2, $3) \
                      @UPSERT(m, \"key\") v = @NEW(v), w = @NEW(w)";
        assert_eq!(
            Dialect::Sqlite.render(upsert),
            "INSERT INTO r (m, \"key\", v) VALUES ($1, $2, $3) \
             ON CONFLICT (m, \"key\") DO UPDATE SET v = EXCLUDED.v, w = EXCLUDED.w"
        );
        assert_eq!(
            Dialect::MySql.render(upsert),
            "INSERT INTO r (m, \"key\", v) VALUES (?, ?, ?) \
             ON DUPLICATE KEY UPDATE v = VALUES(v), w = VALUES(w)"
        );
    }

    #[test]
    fn a_forced_index_is_mysql_only() {
        let t = "SELECT id FROM events @FORCE_INDEX(events_claim) WHERE agent_id = $1";
        assert_eq!(
            Dialect::MySql.render(t),
            "SELECT id FROM events FORCE INDEX (events_claim) WHERE agent_id = ?"
        );
        assert_eq!(
            Dialect::Postgres.render(t),
            "SELECT id FROM events  WHERE agent_id = $1"
        );
    }

    #[test]
    #[should_panic(expected = "once each, in order")]
    fn a_reused_parameter_is_refused_for_mysql() {
        Dialect::MySql.render("UPDATE t SET a = $1, b = $1");
    }

    #[test]
    fn a_statement_is_rendered_once_per_dialect() {
        let a = sql!(Dialect::Postgres, "SELECT $1 @FOR_SHARE");
        assert_eq!(a, "SELECT $1 FOR SHARE");
        let cols = "x, y";
        for d in [Dialect::Sqlite, Dialect::MySql] {
            let s = sql!(d, "SELECT {cols} FROM t WHERE x = $1");
            assert!(s.ends_with(if d == Dialect::MySql { "?" } else { "$1" }));
        }
    }
}
