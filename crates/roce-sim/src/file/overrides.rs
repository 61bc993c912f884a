//! `--set KEY=VALUE`: a scenario's keys changed on the command line, so that a user need not
//! edit the file. Each is applied, in order, to the parsed TOML document before the schema
//! reads it, so a key the schema does not know is refused as a typo in the file is (the
//! unknown key, and the keys that are valid there).
//!
//! `KEY` is a dotted path (`workload.load`, `network.ecn.kmin_bytes`); tables on the way are
//! made when missing. `VALUE` is read as a TOML value (`0.5`, `"websearch"`, `true`,
//! `[1, 2]`), and as a string when it is not one (`network.congestion=dcqcn`).

use anyhow::{anyhow, bail};
use serde::de::DeserializeOwned;
use std::path::Path;
use toml::{Table, Value};

use super::FileError;

/// One `--set KEY=VALUE`, parsed from its text (`"workload.load=0.5".parse()`).
#[derive(Debug, Clone, PartialEq)]
pub struct Set {
    /// The dotted key, split.
    pub path: Vec<String>,
    pub(crate) value: Value,
    /// As given, for messages.
    pub text: String,
}

impl std::str::FromStr for Set {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let Some((key, value)) = s.split_once('=') else {
            return Err(format!("{s:?}: expected KEY=VALUE, like workload.load=0.5"));
        };
        let key = key.trim();
        let path: Vec<String> = key.split('.').map(|p| p.trim().to_owned()).collect();
        if path.iter().any(String::is_empty) {
            return Err(format!(
                "{s:?}: the key {key:?} has an empty part (dotted keys: workload.load)"
            ));
        }
        let value = value.trim();
        let value = match format!("v = {value}").parse::<Table>() {
            Ok(mut t) => t.remove("v").ok_or_else(|| format!("{s:?}: no value"))?,
            Err(_) if !value.is_empty() => Value::String(value.to_owned()),
            Err(_) => return Err(format!("{s:?}: no value after =")),
        };
        Ok(Self {
            path,
            value,
            text: s.to_owned(),
        })
    }
}

/// The `--set`s as the messages give them: "--set a=1 --set b=2".
fn describe(sets: &[Set]) -> String {
    let parts: Vec<String> = sets.iter().map(|s| format!("--set {}", s.text)).collect();
    parts.join(" ")
}

/// Applies `sets` to `doc` (a scenario file's document), in order; refuses a set whose key
/// goes through a value that is not a table.
pub fn apply(doc: &mut Table, sets: &[Set]) -> Result<(), FileError> {
    apply_any(doc, sets).map_err(FileError)
}

fn apply_any(doc: &mut Table, sets: &[Set]) -> anyhow::Result<()> {
    for set in sets {
        let (last, tables) = set.path.split_last().expect("a key has a part");
        let mut table = &mut *doc;
        for (i, part) in tables.iter().enumerate() {
            let slot = table
                .entry(part.clone())
                .or_insert_with(|| Value::Table(Table::new()));
            let Value::Table(inner) = slot else {
                bail!(
                    "--set {}: {} is not a table in the scenario",
                    set.text,
                    set.path[..=i].join(".")
                );
            };
            table = inner;
        }
        table.insert(last.clone(), set.value.clone());
    }
    Ok(())
}

/// The scenario file's `text` read as `T`, with `sets` applied. Without sets it is read
/// straight from the text, so that errors give the line; with them, from the document they
/// changed, and errors name the sets.
pub(crate) fn parse<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    sets: &[Set],
) -> anyhow::Result<T> {
    let toml_error =
        |e: toml::de::Error| anyhow!("{}: {}", path.display(), e.to_string().trim_end());
    if sets.is_empty() {
        return toml::from_str(text).map_err(toml_error);
    }
    let mut doc: Table = toml::from_str(text).map_err(toml_error)?;
    apply_any(&mut doc, sets).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    from_doc(path, doc, sets)
}

/// `doc` (a scenario with `sets` applied) read as `T`; errors name the file and the sets.
pub(crate) fn from_doc<T: DeserializeOwned>(
    path: &Path,
    doc: Table,
    sets: &[Set],
) -> anyhow::Result<T> {
    Value::Table(doc).try_into().map_err(|e: toml::de::Error| {
        anyhow!(
            "{} with {}: {}",
            path.display(),
            describe(sets),
            // "unknown field `x`, expected one of …" then "in `table`" on a line of its own.
            e.to_string().trim_end().replace('\n', " ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_toml_values_or_else_strings() {
        let set = |s: &str| s.parse::<Set>().unwrap();
        assert_eq!(set("workload.load=0.5").value, Value::Float(0.5));
        assert_eq!(set("workload.seed = 3").value, Value::Integer(3));
        assert_eq!(set("a.b=true").value, Value::Boolean(true));
        assert_eq!(set("a=\"x y\"").value, Value::String("x y".into()));
        assert_eq!(set("a=dcqcn").value, Value::String("dcqcn".into()));
        assert_eq!(
            set("a=[1, 2]").value,
            Value::Array(vec![Value::Integer(1), Value::Integer(2)])
        );
        assert_eq!(set("network.ecn.pmax=0.2").path, ["network", "ecn", "pmax"]);
        for bad in ["load", "a..b=1", "=1", "a="] {
            assert!(bad.parse::<Set>().is_err(), "{bad}");
        }
    }

    #[test]
    fn sets_change_keys_and_make_missing_tables() {
        let mut doc: Table = "name = 1\n[workload]\nload = 0.3\n".parse().unwrap();
        let sets: Vec<Set> = ["workload.load=0.7", "network.ecn.pmax=0.1"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        apply(&mut doc, &sets).unwrap();
        assert_eq!(doc["workload"]["load"], Value::Float(0.7));
        assert_eq!(doc["network"]["ecn"]["pmax"], Value::Float(0.1));
        let through = ["name.x=1".parse().unwrap()];
        let err = apply(&mut doc, &through).unwrap_err().to_string();
        assert!(err.contains("--set name.x=1: name is not a table"), "{err}");
    }
}
