//! The JSON form of a runner's rows and of the writes, the one every binding and host
//! uses (a Python and a Node hub over one database read each other's rows):
//!
//! - rows: `{"tasks": [{"task_id", "next_seq", "assigned_attempt", "forgotten"}],
//!   "inbound": [{"task_id", "attempt", "through"}], "commands": [{"task_id", "seq",
//!   "frame"}]}` — every table optional (`null` or absent is empty);
//! - a write: `{"op": "put_task" | "put_command" | "delete_commands" | "delete_task",
//!   ...its columns}` (`delete_commands`: `task_id`, `through`; `delete_task`: `task_id`).
//!
//! Reading is strict: an unknown table or column, a missing column or a wrong type is
//! [`StoreError::InvalidRows`] naming the place (`rows.tasks[2].next_seq`).

use serde_json::{json, Map, Value};

use super::{CommandRow, InboundRow, RowWrite, RunnerRows, StoreError, TaskRow};

fn invalid(message: String) -> StoreError {
    StoreError::InvalidRows { message }
}

fn task_json(t: &TaskRow) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("task_id".into(), json!(t.task_id));
    m.insert("next_seq".into(), json!(t.next_seq));
    m.insert("assigned_attempt".into(), json!(t.assigned_attempt));
    m.insert("forgotten".into(), json!(t.forgotten));
    m
}

fn command_json(c: &CommandRow) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("task_id".into(), json!(c.task_id));
    m.insert("seq".into(), json!(c.seq));
    m.insert("frame".into(), json!(c.frame));
    m
}

/// One row being read: its place for messages, and its columns.
struct Row<'a> {
    place: String,
    columns: &'a Map<String, Value>,
}

impl<'a> Row<'a> {
    fn of(table: &str, i: usize, v: &'a Value, allowed: &[&str]) -> Result<Self, StoreError> {
        let place = format!("rows.{table}[{i}]");
        let columns = v
            .as_object()
            .ok_or_else(|| invalid(format!("{place} must be an object")))?;
        if let Some(k) = columns.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(invalid(format!("{place}: unknown column {k:?}")));
        }
        Ok(Row { place, columns })
    }

    fn get(&self, k: &str) -> Result<&'a Value, StoreError> {
        self.columns
            .get(k)
            .ok_or_else(|| invalid(format!("{}.{k} is missing", self.place)))
    }

    fn string(&self, k: &str) -> Result<String, StoreError> {
        self.get(k)?
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| invalid(format!("{}.{k} must be a string", self.place)))
    }

    fn number(&self, k: &str) -> Result<u64, StoreError> {
        self.get(k)?
            .as_u64()
            .ok_or_else(|| invalid(format!("{}.{k} must be a non-negative integer", self.place)))
    }

    fn boolean(&self, k: &str) -> Result<bool, StoreError> {
        self.get(k)?
            .as_bool()
            .ok_or_else(|| invalid(format!("{}.{k} must be a boolean", self.place)))
    }
}

const TASK_COLUMNS: &[&str] = &["task_id", "next_seq", "assigned_attempt", "forgotten"];
const INBOUND_COLUMNS: &[&str] = &["task_id", "attempt", "through"];
const COMMAND_COLUMNS: &[&str] = &["task_id", "seq", "frame"];

impl RunnerRows {
    /// The rows' JSON form (see the [module docs](self)).
    pub fn to_json(&self) -> Value {
        json!({
            "tasks": self.tasks.iter().map(|t| Value::Object(task_json(t))).collect::<Vec<_>>(),
            "inbound": self.inbound.iter().map(|r| json!({
                "task_id": r.task_id, "attempt": r.attempt, "through": r.through,
            })).collect::<Vec<_>>(),
            "commands": self.commands.iter().map(|c| Value::Object(command_json(c))).collect::<Vec<_>>(),
        })
    }

    /// Rows from their JSON form; anything else is [`StoreError::InvalidRows`]. Whether
    /// the rows make a hub session is [`HubSession::from_rows`](crate::session::HubSession::from_rows)'s
    /// to say.
    pub fn from_json(v: &Value) -> Result<Self, StoreError> {
        let obj = v
            .as_object()
            .ok_or_else(|| invalid("rows must be an object".into()))?;
        if let Some(k) = obj
            .keys()
            .find(|k| !matches!(k.as_str(), "tasks" | "inbound" | "commands"))
        {
            return Err(invalid(format!("rows: unknown table {k:?}")));
        }
        let table = |k: &str| -> Result<&[Value], StoreError> {
            match obj.get(k) {
                None | Some(Value::Null) => Ok(&[]),
                Some(Value::Array(a)) => Ok(a.as_slice()),
                Some(_) => Err(invalid(format!("rows.{k} must be an array"))),
            }
        };
        let mut rows = RunnerRows::default();
        for (i, v) in table("tasks")?.iter().enumerate() {
            let r = Row::of("tasks", i, v, TASK_COLUMNS)?;
            rows.tasks.push(TaskRow {
                task_id: r.string("task_id")?,
                next_seq: r.number("next_seq")?,
                assigned_attempt: r.number("assigned_attempt")?,
                forgotten: r.boolean("forgotten")?,
            });
        }
        for (i, v) in table("inbound")?.iter().enumerate() {
            let r = Row::of("inbound", i, v, INBOUND_COLUMNS)?;
            rows.inbound.push(InboundRow {
                task_id: r.string("task_id")?,
                attempt: r.number("attempt")?,
                through: r.number("through")?,
            });
        }
        for (i, v) in table("commands")?.iter().enumerate() {
            let r = Row::of("commands", i, v, COMMAND_COLUMNS)?;
            rows.commands.push(CommandRow {
                task_id: r.string("task_id")?,
                seq: r.number("seq")?,
                frame: r.string("frame")?,
            });
        }
        Ok(rows)
    }
}

impl RowWrite {
    /// The write's JSON form: `op` first, then its columns (see the [module docs](self)).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("op".into(), json!(self.op()));
        match self {
            RowWrite::PutTask(t) => m.extend(task_json(t)),
            RowWrite::PutCommand(c) => m.extend(command_json(c)),
            RowWrite::DeleteCommands { task_id, through } => {
                m.insert("task_id".into(), json!(task_id));
                m.insert("through".into(), json!(through));
            }
            RowWrite::DeleteTask { task_id } => {
                m.insert("task_id".into(), json!(task_id));
            }
        }
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_refusals_name_the_place() {
        let rows = RunnerRows {
            tasks: vec![TaskRow {
                task_id: "T".into(),
                next_seq: 3,
                assigned_attempt: 1,
                forgotten: false,
            }],
            inbound: vec![InboundRow {
                task_id: "T".into(),
                attempt: 1,
                through: 7,
            }],
            commands: vec![CommandRow {
                task_id: "T".into(),
                seq: 2,
                frame: "{}".into(),
            }],
        };
        assert_eq!(RunnerRows::from_json(&rows.to_json()).unwrap(), rows);
        assert_eq!(
            RunnerRows::from_json(&json!({"tasks": null})).unwrap(),
            RunnerRows::default()
        );
        let refused = |v: Value| match RunnerRows::from_json(&v) {
            Err(StoreError::InvalidRows { message }) => message,
            other => panic!("{other:?}"),
        };
        assert_eq!(refused(json!([])), "rows must be an object");
        assert_eq!(refused(json!({"task": []})), "rows: unknown table \"task\"");
        assert_eq!(
            refused(json!({"inbound": {}})),
            "rows.inbound must be an array"
        );
        assert_eq!(
            refused(json!({"tasks": [{"task_id": "T", "next_seq": -1,
                "assigned_attempt": 0, "forgotten": false}]})),
            "rows.tasks[0].next_seq must be a non-negative integer"
        );
        assert_eq!(
            refused(json!({"commands": [{"task_id": "T", "seq": 1}]})),
            "rows.commands[0].frame is missing"
        );
        assert_eq!(
            refused(json!({"inbound": [{"task_id": "T", "attempt": 1, "through": 1, "x": 0}]})),
            "rows.inbound[0]: unknown column \"x\""
        );
    }

    #[test]
    fn writes_name_their_op_first() {
        let w = RowWrite::DeleteCommands {
            task_id: "T".into(),
            through: 4,
        };
        let text = serde_json::to_string(&w.to_json()).unwrap();
        assert_eq!(
            text,
            r#"{"op":"delete_commands","task_id":"T","through":4}"#
        );
    }
}
