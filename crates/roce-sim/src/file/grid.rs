//! The parameter grid of `roce sim sweep`: a scenario's `[sweep]` table of axes, its points in a
//! fixed order, the slice of them one shard runs, and each point's scenario.
//!
//! An axis is a dotted key of the scenario and the values it takes, e.g.
//! `"workload.load" = [0.3, 0.5]` or `"workload.seed" = [1, 2, 3]`. The points are the cartesian
//! product of the axes, numbered with the axes in their keys' alphabetical order (TOML tables
//! have none of their own) and the last one varying fastest; point `i` of a grid is always the same scenario, so that shards run on different
//! machines (`--shard i/N`: the points `i`, `i + N`, `i + 2N`, …) can be merged by number.
//! A key must name a value the scenario has (a typo would otherwise sweep nothing).

use anyhow::{Context, bail};
use toml::{Table, Value};

use super::FileError;

/// The axes of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// Dotted key and its values, in the keys' order.
    pub axes: Vec<(String, Vec<Value>)>,
}

/// The most points one grid may have.
const MAX_POINTS: usize = 100_000;

impl Grid {
    /// The grid of `sweep` (the `[sweep]` table of `file`), checked against the scenario
    /// `base` (without its `[sweep]`): every key names one of its values, every axis has at
    /// least one value, and there are at most 100000 points.
    pub fn new(file: &str, sweep: &Table, base: &Table) -> Result<Self, FileError> {
        Self::checked(file, sweep, base).map_err(FileError)
    }

    fn checked(file: &str, sweep: &Table, base: &Table) -> anyhow::Result<Self> {
        if sweep.is_empty() {
            bail!("{file}: [sweep] has no axes: give `\"key\" = [values]` lines");
        }
        let mut axes = Vec::new();
        // `Table` iterates its keys in order: the points' numbering does not depend on how
        // the file lists them.
        let mut points = 1usize;
        for (key, values) in sweep {
            let Value::Array(values) = values else {
                bail!("{file}: [sweep] {key}: expected an array of values, like [0.3, 0.5]");
            };
            if values.is_empty() {
                bail!("{file}: [sweep] {key}: an axis needs at least one value");
            }
            if lookup(base, key).is_none() {
                bail!(
                    "{file}: [sweep] {key}: the scenario has no such key (sweep keys are dotted \
                     paths of keys it sets, like \"workload.load\")"
                );
            }
            points = points.saturating_mul(values.len());
            axes.push((key.clone(), values.clone()));
        }
        if points > MAX_POINTS {
            bail!("{file}: [sweep] makes {points} points, more than {MAX_POINTS}");
        }
        Ok(Self { axes })
    }

    /// How many points.
    pub fn len(&self) -> usize {
        self.axes.iter().map(|(_, v)| v.len()).product()
    }

    /// Whether it has no point (an axis without values).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Point `index`: each axis's key and value.
    pub fn point(&self, index: usize) -> Vec<(&str, &Value)> {
        let mut rest = index;
        let mut out: Vec<(&str, &Value)> = self
            .axes
            .iter()
            .rev()
            .map(|(key, values)| {
                let value = &values[rest % values.len()];
                rest /= values.len();
                (key.as_str(), value)
            })
            .collect();
        out.reverse();
        out
    }

    /// The scenario of point `index`: `base` with the point's values set.
    pub fn scenario(&self, base: &Table, index: usize) -> Result<Table, FileError> {
        let mut table = base.clone();
        for (key, value) in self.point(index) {
            let slot = lookup_mut(&mut table, key)
                .with_context(|| format!("[sweep] {key}"))
                .map_err(FileError)?;
            *slot = value.clone();
        }
        Ok(table)
    }
}

/// Which slice of a grid one run takes: `index` of `count` (`--shard i/N`, 0 ≤ i < N).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which shard, from 0.
    pub index: usize,
    /// How many shards the grid is run in.
    pub count: usize,
}

impl Shard {
    /// The whole grid.
    pub const ALL: Self = Self { index: 0, count: 1 };

    /// The point numbers of a grid of `len` points this shard runs: every `count`-th from
    /// `index`, so that shards get points from every part of the grid.
    pub fn points(self, len: usize) -> impl Iterator<Item = usize> {
        (self.index..len).step_by(self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// `i/N`: shard `i` of `N`, counted from 0 (a Slurm job array's `$SLURM_ARRAY_TASK_ID` of
    /// `--array=0-(N-1)`).
    fn from_str(s: &str) -> Result<Self, String> {
        let parse = |t: &str| t.trim().parse::<usize>().ok();
        match s.split_once('/').map(|(i, n)| (parse(i), parse(n))) {
            Some((Some(index), Some(count))) if count > 0 && index < count => {
                Ok(Self { index, count })
            }
            _ => Err(format!(
                "{s:?}: expected i/N with 0 <= i < N, like 0/4 (shard 0 of 4)"
            )),
        }
    }
}

/// The value at dotted `key` of `table`.
fn lookup<'a>(table: &'a Table, key: &str) -> Option<&'a Value> {
    let (head, rest) = match key.split_once('.') {
        Some((head, rest)) => (head, Some(rest)),
        None => (key, None),
    };
    let value = table.get(head)?;
    match (rest, value) {
        (None, value) => Some(value),
        (Some(rest), Value::Table(inner)) => lookup(inner, rest),
        (Some(_), _) => None,
    }
}

fn lookup_mut<'a>(table: &'a mut Table, key: &str) -> anyhow::Result<&'a mut Value> {
    let (head, rest) = match key.split_once('.') {
        Some((head, rest)) => (head, Some(rest)),
        None => (key, None),
    };
    let Some(value) = table.get_mut(head) else {
        bail!("no key {head:?}");
    };
    match (rest, value) {
        (None, value) => Ok(value),
        (Some(rest), Value::Table(inner)) => lookup_mut(inner, rest),
        (Some(_), _) => bail!("{head:?} is not a table"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Table {
        text.parse().unwrap()
    }

    fn grid(sweep: &str, base: &str) -> Result<Grid, FileError> {
        Grid::new("s.toml", &table(sweep), &table(base))
    }

    const BASE: &str = "name = \"x\"\n[workload]\nload = 0.3\nseed = 1\n[network]\nkmin_kb = 5\n";

    #[test]
    fn points_are_the_product_with_the_last_axis_fastest() {
        let g = grid(
            "\"workload.load\" = [0.3, 0.5]\n\"workload.seed\" = [1, 2, 3]\n",
            BASE,
        )
        .unwrap();
        assert_eq!(g.len(), 6);
        let seen: Vec<(f64, i64)> = (0..6)
            .map(|i| {
                let p = g.point(i);
                (p[0].1.as_float().unwrap(), p[1].1.as_integer().unwrap())
            })
            .collect();
        assert_eq!(
            seen,
            [(0.3, 1), (0.3, 2), (0.3, 3), (0.5, 1), (0.5, 2), (0.5, 3)]
        );
        // The scenario of a point has its values and keeps the rest.
        let s = g.scenario(&table(BASE), 4).unwrap();
        assert_eq!(lookup(&s, "workload.load"), Some(&Value::Float(0.5)));
        assert_eq!(lookup(&s, "workload.seed"), Some(&Value::Integer(2)));
        assert_eq!(lookup(&s, "network.kmin_kb"), Some(&Value::Integer(5)));
        assert_eq!(lookup(&s, "name"), Some(&Value::String("x".into())));
    }

    #[test]
    fn shards_cover_the_grid_once_between_them() {
        let len = 10;
        let mut all: Vec<usize> = (0..3)
            .flat_map(|i| Shard { index: i, count: 3 }.points(len))
            .collect();
        assert_eq!(
            Shard { index: 1, count: 3 }.points(len).collect::<Vec<_>>(),
            [1, 4, 7]
        );
        all.sort_unstable();
        assert_eq!(all, (0..len).collect::<Vec<_>>());
        assert_eq!(Shard::ALL.points(3).collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn shard_arguments_are_checked() {
        assert_eq!("2/4".parse(), Ok(Shard { index: 2, count: 4 }));
        for bad in ["4/4", "1/0", "1", "a/b", "-1/3"] {
            let err = bad.parse::<Shard>().unwrap_err();
            assert!(err.contains("expected i/N"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_key_the_scenario_does_not_have_is_refused_by_name() {
        let err = grid("\"workload.lod\" = [0.3]\n", BASE).unwrap_err();
        assert!(
            err.to_string()
                .contains("s.toml: [sweep] workload.lod: the scenario has no such key"),
            "{err}"
        );
        let err = grid("\"workload.load\" = 0.3\n", BASE).unwrap_err();
        assert!(err.to_string().contains("expected an array"), "{err}");
        let err = grid("\"workload.load\" = []\n", BASE).unwrap_err();
        assert!(err.to_string().contains("at least one value"), "{err}");
        let err = grid("", BASE).unwrap_err();
        assert!(err.to_string().contains("no axes"), "{err}");
        // A key through a value that is not a table.
        let err = grid("\"name.x\" = [1]\n", BASE).unwrap_err();
        assert!(err.to_string().contains("no such key"), "{err}");
    }

    #[test]
    fn a_grid_too_large_is_refused_before_anything_runs() {
        let values = format!("[{}]", vec!["1"; 400].join(","));
        let sweep = format!("\"workload.seed\" = {values}\n\"network.kmin_kb\" = {values}\n");
        let err = grid(&sweep, BASE).unwrap_err();
        assert!(err.to_string().contains("160000 points"), "{err}");
    }
}
