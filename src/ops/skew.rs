//! Skew handling shared by joins and grouping: the physical strategy
//! (`shuffle`, `broadcast`, `skew`, `auto`), hot keys (given by hand or
//! found by sampling), and deterministic salts.
//!
//! A hot key's records are spread over `salts` partitions by a salt that is
//! a hash of the whole record (never a random number), so the same input
//! always takes the same path; the partition `(key, salt)` is sent to worker
//! `hash(key) + salt` (mod the worker count), so the salts of one hot key
//! land on consecutive workers. Non-hot keys have salt 0 and go where a
//! plain shuffle sends them.
//!
//! Invariant: the strategy and the hot-key set decide only where records
//! are computed, never what is computed; every strategy gives exactly the
//! output of `shuffle`. A sampled hot-key set is fixed when the job is
//! planned (once per batch run; a stream deployment records its parameters,
//! `hot=` included, in the catalog and has no sampling).

use std::collections::HashSet;
use std::sync::Arc;

use differential_dataflow::Hashable;

use crate::job::{DataContext, ParamSpec, Params, PlanError};
use crate::schema::ColumnType;
use crate::value::{Row, Value};

/// The most partitions a hot key may be salted into: each salt of a hot key
/// of a skew join gets a copy of the key's right-side rows.
pub const MAX_SALTS: u32 = 4096;

/// The parameters every skew-aware job declares.
pub fn param_specs(broadcast: bool) -> Vec<ParamSpec> {
    let mut specs = vec![
        ParamSpec {
            name: "strategy",
            default: Some("auto"),
            help: if broadcast {
                "shuffle, broadcast (the right side to every worker), skew (salt hot keys) or auto"
            } else {
                "shuffle, skew (two-phase for hot keys) or auto"
            },
        },
        ParamSpec {
            name: "hot",
            default: Some(""),
            help: "hot keys by hand, KEY[,KEY...] (columns of a key separated by |); empty: sample",
        },
        ParamSpec {
            name: "salts",
            default: Some("auto"),
            help: "partitions per hot key (auto: the worker count)",
        },
        ParamSpec {
            name: "sample_rate",
            default: Some("0.01"),
            help: "share of the (large) input read to find hot keys",
        },
        ParamSpec {
            name: "hot_threshold",
            default: Some("0.01"),
            help: "a key is hot when it holds at least this share of the sampled rows",
        },
    ];
    if broadcast {
        specs.push(ParamSpec {
            name: "broadcast_limit",
            default: Some("32M"),
            help: "auto broadcasts the right side when its input is at most this many bytes (K, M, G)",
        });
    }
    specs
}

/// The strategy asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrategyParam {
    /// `shuffle`: both sides (or the grouped rows) partitioned by key.
    Shuffle,
    /// `broadcast` (joins only): the right side sent to every worker.
    Broadcast,
    /// `skew`: hot keys salted (joins) or grouped in two phases.
    Skew,
    /// `auto`: broadcast a small enough right side, else salt the hot keys
    /// a sample finds, else shuffle.
    Auto,
}

/// How a join or grouping is computed, once planned.
#[derive(Clone, Debug)]
pub enum Physical {
    /// Both sides partitioned by key.
    Shuffle,
    /// The right side sent whole to every worker; the left side stays put.
    Broadcast,
    /// Hot keys salted; the rest shuffled.
    Skew(Arc<HotKeys>),
}

impl Physical {
    /// The strategy's name, as the summary reports it.
    pub fn name(&self) -> &'static str {
        match self {
            Physical::Shuffle => "shuffle",
            Physical::Broadcast => "broadcast",
            Physical::Skew(_) => "skew",
        }
    }
}

/// A fixed set of hot keys and the number of salts for each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HotKeys {
    /// Keys as rows of key values (one value per key column).
    pub keys: Vec<Row>,
    /// Salts per hot key; `None`: the worker count.
    pub salts: Option<u32>,
}

impl HotKeys {
    /// The salt count for `peers` workers.
    pub fn salts(&self, peers: usize) -> u32 {
        self.salts.unwrap_or(peers as u32).max(1)
    }

    /// The hot keys converted to a key type.
    pub fn set<K: std::hash::Hash + Eq>(&self, convert: impl Fn(&Row) -> Option<K>) -> HashSet<K> {
        self.keys.iter().filter_map(convert).collect()
    }
}

/// The salt of a record of a hot key: a hash of the whole record.
pub fn salt_of<D: std::hash::Hash>(record: &D, salts: u32) -> u32 {
    // The high bits: the low bits of this hash family also route exchanges.
    ((record.hashed() >> 32) % salts as u64) as u32
}

/// The routing hash of partition `(key, salt)`: the salts of a key go to
/// consecutive workers, salt 0 where a plain shuffle sends the key.
pub fn route<K: Hashable>(key: &K, salt: u32) -> u64 {
    key.hashed().into().wrapping_add(salt as u64)
}

/// Parsed skew parameters.
#[derive(Clone, Debug)]
pub struct SkewParams {
    /// `strategy`: the strategy asked for.
    pub strategy: StrategyParam,
    /// `hot`: hot keys given by hand, each a row of key values (values
    /// inferred from their text, an empty one null); empty means sample.
    pub hot: Vec<Row>,
    /// `salts`: partitions per hot key, 1 to [`MAX_SALTS`]; `None` (`auto`)
    /// is the worker count.
    pub salts: Option<u32>,
    /// `sample_rate`: the share of the large input sampled for hot keys, in
    /// (0, 1].
    pub sample_rate: f64,
    /// `hot_threshold`: the share of the sampled rows, in (0, 1], at which a
    /// key is hot.
    pub hot_threshold: f64,
    /// `broadcast_limit`: `auto` broadcasts a right side of at most this
    /// many bytes; `None` for jobs without a broadcast strategy.
    pub broadcast_limit: Option<u64>,
}

impl SkewParams {
    /// Reads the parameters of [`param_specs`]; `key_width` is the number
    /// of key columns (each `hot=` key must have as many values).
    /// Parameters absent from `params` (built in code with
    /// [`Params::from_pairs`]) take their declared defaults.
    pub fn parse(params: &Params, key_width: usize, broadcast: bool) -> Result<Self, PlanError> {
        let bad = |name: &str, reason: String| params.bad(name, reason);
        let defaults = param_specs(true);
        let get = |name: &str| -> &str {
            match params.get(name) {
                "" => defaults
                    .iter()
                    .find(|p| p.name == name)
                    .and_then(|p| p.default)
                    .unwrap_or(""),
                v => v,
            }
        };
        let strategy = match get("strategy") {
            "shuffle" => StrategyParam::Shuffle,
            "broadcast" if broadcast => StrategyParam::Broadcast,
            "skew" => StrategyParam::Skew,
            "auto" => StrategyParam::Auto,
            _ => {
                let known = if broadcast {
                    "shuffle, broadcast, skew or auto"
                } else {
                    "shuffle, skew or auto"
                };
                return Err(bad("strategy", format!("expected {known}")));
            }
        };
        let hot = parse_hot(params, key_width)?;
        let salts = match get("salts") {
            "auto" => None,
            text => match text.trim().parse::<u32>() {
                Ok(n @ 1..=MAX_SALTS) => Some(n),
                _ => {
                    let expected = format!("expected auto or an integer from 1 to {MAX_SALTS}");
                    return Err(bad("salts", expected));
                }
            },
        };
        let share = |name: &str| -> Result<f64, PlanError> {
            match get(name).parse::<f64>() {
                Ok(x) if x > 0.0 && x <= 1.0 => Ok(x),
                _ => Err(bad(name, "expected a share in (0, 1]".into())),
            }
        };
        let broadcast_limit = if broadcast {
            Some(parse_bytes(get("broadcast_limit")).ok_or_else(|| {
                bad(
                    "broadcast_limit",
                    "expected bytes, e.g. 33554432, 512K, 32M, 1G".into(),
                )
            })?)
        } else {
            None
        };
        Ok(SkewParams {
            strategy,
            hot,
            salts,
            sample_rate: share("sample_rate")?,
            hot_threshold: share("hot_threshold")?,
            broadcast_limit,
        })
    }

    /// Plans a join whose large side is the input named `large` (keyed by
    /// its columns `large_key`) and small side the input named `small`. `what` names the
    /// join in the decision reported through `data`.
    pub fn plan_join(
        &self,
        data: &dyn DataContext,
        what: &str,
        large: &str,
        large_key: &[usize],
        small: &str,
    ) -> Physical {
        let (physical, why) = match self.strategy {
            StrategyParam::Shuffle => (Physical::Shuffle, "asked".to_string()),
            StrategyParam::Broadcast => (Physical::Broadcast, "asked".to_string()),
            StrategyParam::Skew => {
                let (hot, why) = self.hot_keys(data, large, &untyped(large_key));
                (Physical::Skew(hot), why)
            }
            StrategyParam::Auto => {
                let limit = self.broadcast_limit.unwrap_or(0);
                match data.input_bytes(small) {
                    Some(bytes) if bytes <= limit => (
                        Physical::Broadcast,
                        format!(
                            "auto: right side {} bytes <= broadcast_limit {limit}",
                            bytes
                        ),
                    ),
                    _ => {
                        let (hot, why) = self.hot_keys(data, large, &untyped(large_key));
                        if hot.keys.is_empty() {
                            (Physical::Shuffle, format!("auto: {why}"))
                        } else {
                            (Physical::Skew(hot), format!("auto: {why}"))
                        }
                    }
                }
            }
        };
        data.decide(format!("{what}: strategy {} ({why})", physical.name()));
        physical
    }

    /// Plans a grouping of the input named `input` by its columns `key`: `skew`
    /// (two-phase for hot keys) or `shuffle`.
    pub fn plan_group(
        &self,
        data: &dyn DataContext,
        what: &str,
        input: &str,
        key: &[usize],
    ) -> Physical {
        let (physical, why) = match self.strategy {
            StrategyParam::Shuffle | StrategyParam::Broadcast => {
                (Physical::Shuffle, "asked".to_string())
            }
            StrategyParam::Skew | StrategyParam::Auto => {
                let (hot, why) = self.hot_keys(data, input, &untyped(key));
                if hot.keys.is_empty() && self.strategy == StrategyParam::Auto {
                    (Physical::Shuffle, format!("auto: {why}"))
                } else {
                    (Physical::Skew(hot), why)
                }
            }
        };
        data.decide(format!("{what}: strategy {} ({why})", physical.name()));
        physical
    }

    /// The hot keys: given by hand, else found in a sample of the input's
    /// `key` columns, each read as its type (as the dataflow reads it, so
    /// that the keys found are equal to the keys the rows carry).
    pub fn hot_keys(
        &self,
        data: &dyn DataContext,
        input: &str,
        key: &[(usize, ColumnType)],
    ) -> (Arc<HotKeys>, String) {
        let hot = |keys: Vec<Row>| {
            Arc::new(HotKeys {
                keys,
                salts: self.salts,
            })
        };
        if !self.hot.is_empty() {
            let why = format!(
                "{} hot keys given: {}",
                self.hot.len(),
                show_keys(&self.hot)
            );
            return (hot(self.hot.clone()), why);
        }
        match data.sample_keys(input, key, self.sample_rate) {
            None => (hot(Vec::new()), "no sample and no hot= keys".into()),
            Some(sample) => {
                let found = detect(&sample, self.hot_threshold);
                let shares: Vec<String> = found
                    .iter()
                    .map(|(k, n)| {
                        format!(
                            "{} ({:.1}%)",
                            show_keys(std::slice::from_ref(k)),
                            100.0 * *n as f64 / sample.rows.max(1) as f64
                        )
                    })
                    .collect();
                let why = format!(
                    "{} hot keys at >= {}% of {} sampled rows{}{}",
                    found.len(),
                    self.hot_threshold * 100.0,
                    sample.rows,
                    if found.is_empty() { "" } else { ": " },
                    shares.join(", ")
                );
                (hot(found.into_iter().map(|(k, _)| k).collect()), why)
            }
        }
    }
}

/// Key columns read as the values their text suggests (the built-in
/// jobs' inputs are untyped).
fn untyped(key: &[usize]) -> Vec<(usize, ColumnType)> {
    key.iter().map(|&c| (c, ColumnType::Any)).collect()
}

/// The `hot=` keys: `|` between a key's values, an empty value is null,
/// each key as wide as the grouping or join key.
fn parse_hot(params: &Params, key_width: usize) -> Result<Vec<Row>, PlanError> {
    let mut hot = Vec::new();
    for key in params.list("hot") {
        let row: Row = key
            .split('|')
            .map(|f| {
                if f.is_empty() {
                    Value::Null
                } else {
                    Value::infer(f)
                }
            })
            .collect();
        if row.len() != key_width {
            let reason = format!(
                "key {key:?} has {} values for {key_width} key columns",
                row.len()
            );
            return Err(params.bad("hot", reason));
        }
        hot.push(row);
    }
    Ok(hot)
}

/// Keys holding at least `threshold` of the sampled rows (null keys never
/// match in a join and are not salted), most frequent first, at most 1000.
pub fn detect(sample: &crate::job::KeySample, threshold: f64) -> Vec<(Row, u64)> {
    let min = (threshold * sample.rows as f64).ceil().max(1.0) as u64;
    let mut hot: Vec<(Row, u64)> = sample
        .counts
        .iter()
        .filter(|(k, n)| **n >= min && !k.iter().any(Value::is_null))
        .map(|(k, n)| (k.clone(), *n))
        .collect();
    hot.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    hot.truncate(1000);
    hot
}

fn show_keys(keys: &[Row]) -> String {
    let shown: Vec<String> = keys
        .iter()
        .take(8)
        .map(|k| {
            k.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    let more = if keys.len() > 8 { ", ..." } else { "" };
    format!("{}{more}", shown.join(", "))
}

/// `123`, `512K`, `32M`, `1G` (powers of 1024).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, mult) = match text.char_indices().last()? {
        (i, 'K' | 'k') => (&text[..i], 1u64 << 10),
        (i, 'M' | 'm') => (&text[..i], 1 << 20),
        (i, 'G' | 'g') => (&text[..i], 1 << 30),
        _ => (text, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{KeySample, NoData};

    fn params(pairs: &[(&str, &str)]) -> Params {
        let mut all = vec![
            ("strategy", "auto"),
            ("hot", ""),
            ("salts", "auto"),
            ("sample_rate", "0.01"),
            ("hot_threshold", "0.01"),
            ("broadcast_limit", "32M"),
        ];
        for (k, v) in pairs {
            all.retain(|(n, _)| n != k);
            all.push((k, v));
        }
        Params::from_pairs(&all)
    }

    #[test]
    fn parses_hot_keys_and_limits() {
        let p = SkewParams::parse(&params(&[("hot", "a|1,b|2"), ("salts", "8")]), 2, true).unwrap();
        assert_eq!(
            p.hot,
            vec![
                vec![Value::str("a"), Value::Int(1)],
                vec![Value::str("b"), Value::Int(2)]
            ]
        );
        assert_eq!(p.salts, Some(8));
        assert_eq!(p.broadcast_limit, Some(32 << 20));
        assert!(SkewParams::parse(&params(&[("hot", "a")]), 2, true).is_err());
        assert!(SkewParams::parse(&params(&[("strategy", "broadcast")]), 1, false).is_err());
        assert!(SkewParams::parse(&params(&[("sample_rate", "0")]), 1, true).is_err());
        assert!(SkewParams::parse(&params(&[("salts", "0")]), 1, true).is_err());
        assert_eq!(parse_bytes("512K"), Some(512 << 10));
        assert_eq!(parse_bytes("x"), None);
    }

    #[test]
    fn detect_takes_keys_over_the_threshold_most_frequent_first() {
        let mut sample = KeySample {
            rows: 100,
            ..Default::default()
        };
        sample.counts.insert(vec![Value::Int(1)], 30);
        sample.counts.insert(vec![Value::Int(2)], 50);
        sample.counts.insert(vec![Value::Int(3)], 5);
        sample.counts.insert(vec![Value::Null], 15);
        let hot = detect(&sample, 0.1);
        assert_eq!(
            hot,
            vec![(vec![Value::Int(2)], 50), (vec![Value::Int(1)], 30)]
        );
    }

    #[test]
    fn without_data_auto_shuffles_unless_keys_are_given() {
        let p = SkewParams::parse(&params(&[]), 1, true).unwrap();
        assert!(matches!(
            p.plan_join(&NoData, "join", "left", &[0], "right"),
            Physical::Shuffle
        ));
        let p = SkewParams::parse(&params(&[("hot", "7")]), 1, true).unwrap();
        match p.plan_join(&NoData, "join", "left", &[0], "right") {
            Physical::Skew(hot) => assert_eq!(hot.keys, vec![vec![Value::Int(7)]]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn salts_are_a_function_of_the_record() {
        let row = vec![Value::Int(1), Value::str("x")];
        assert_eq!(salt_of(&row, 16), salt_of(&row.clone(), 16));
        let spread: HashSet<u32> = (0..200)
            .map(|i| salt_of(&vec![Value::Int(1), Value::Int(i)], 4))
            .collect();
        assert_eq!(spread.len(), 4);
    }
}
