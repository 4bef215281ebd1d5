//! `wordcount`: words in text files, counted.
//!
//! Input `text`, read as plain text whatever its extension (one row per
//! line). A word is a maximal run of alphanumeric characters (Unicode), lowercased.
//! Output `counts`: `word,count`; key: `word`.

use crate::ops::aggregate::{AggKind, Aggregates, GroupAggregate};
use crate::prelude::*;

pub struct WordCount;

impl Job for WordCount {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "wordcount",
            version: 1,
            about: "Count words in text files (lowercased, split on non-alphanumerics)",
            inputs: vec![InputSpec {
                name: "text",
                columns: &[("line", ColumnType::Str)],
                format: Some(InputFormat::Text),
                about: "text files, read line by line",
            }],
            params: vec![],
            outputs: vec![OutputSpec {
                name: "counts",
                about: "word, count",
            }],
        }
    }

    fn plan(
        &self,
        _params: &Params,
        inputs: &Schemas,
        _data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        Ok(Plan::new(
            vec![inputs.project("text")?],
            vec![OutputSchema {
                name: "counts".into(),
                columns: vec!["word".into(), "count".into()],
                key: vec![0],
            }],
            WordCountFlow,
        ))
    }
}

/// The words of a line, lowercased.
fn words(line: &str) -> impl Iterator<Item = String> + '_ {
    line.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

struct WordCountFlow;

impl Dataflow for WordCountFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        _context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        let lines = inputs.take("text")?;
        let count = Aggregates::over_positions(&[(AggKind::Count, None)]);
        let counts = lines
            .flat_map(|row| match &row[0] {
                Value::Str(line) => words(line)
                    .map(|w| vec![Value::str(&w)])
                    .collect::<Vec<_>>(),
                _ => Vec::new(),
            })
            .group_aggregate(vec![0], vec![], count);
        Ok(Outputs::from([("counts", counts)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run_job;

    #[test]
    fn splits_on_non_alphanumerics_and_lowercases() {
        let lines = vec![
            vec![Value::str("The cat, the HAT!")],
            vec![Value::str("  café—Café 42 ")],
            vec![Value::Null],
        ];
        let out = run_job(&WordCount, &[], &["line"], vec![lines]);
        let text: Vec<String> = out[0]
            .iter()
            .map(|r| format!("{}={}", r[0], r[1]))
            .collect();
        assert_eq!(text, ["42=1", "café=2", "cat=1", "hat=1", "the=2"]);
    }
}
