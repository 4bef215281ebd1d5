//! `followers`: the social fan-out, a skewed join by nature — one account
//! has millions of followers.
//!
//! Inputs `follows` (needs `follower`, `followee`) and `posts` (needs
//! `author`, `post`). Outputs `timeline`: `follower,author,post`, one row
//! per post of every account a follower follows (`follows JOIN posts ON
//! followee = author`; a bag, key: the whole row), and `follower_counts`:
//! `followee,followers` (key: `followee`).
//!
//! The strategy parameters are the `join` job's (`strategy`, `hot`, `salts`,
//! `sample_rate`, `hot_threshold`, `broadcast_limit`; see
//! [`crate::ops::skew`]): `follows` is the large side, sampled on
//! `followee`. The follower counts are grouped in two phases for the hot
//! followees (the join's, or a sample's when the join broadcasts). Every
//! strategy gives the same outputs.

use crate::prelude::*;

use crate::ops::aggregate::{AggSpec, Aggregates, GroupAggregate};
use crate::ops::join::{JoinColumns, JoinKind, RelationalJoin};
use crate::ops::skew::{self, Physical, SkewParams, StrategyParam};

pub struct Followers;

impl Job for Followers {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "followers",
            version: 1,
            about: "Fan posts out to followers' timelines, and count followers per account",
            inputs: vec![
                InputSpec {
                    name: "follows",
                    columns: &[("follower", ColumnType::Any), ("followee", ColumnType::Any)],
                    format: None,
                    about: "the follow graph: follower follows followee",
                },
                InputSpec {
                    name: "posts",
                    columns: &[("author", ColumnType::Any), ("post", ColumnType::Any)],
                    format: None,
                    about: "posts by author",
                },
            ],
            params: skew::param_specs(true),
            outputs: vec![
                OutputSpec {
                    name: "timeline",
                    about: "follower, author, post: every post of every account followed",
                },
                OutputSpec {
                    name: "follower_counts",
                    about: "followee, followers",
                },
            ],
        }
    }

    fn plan(
        &self,
        params: &Params,
        inputs: &Schemas,
        data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        let follows = inputs.project("follows")?;
        let posts = inputs.project("posts")?;
        let followee = inputs.get("follows")?.index("followee")?;
        let skew = SkewParams::parse(params, 1, true)?;
        let join = skew.plan_join(
            data,
            "followers timeline join",
            "follows",
            &[followee],
            "posts",
        );
        let group = match (&join, skew.strategy) {
            (Physical::Skew(hot), _) => {
                data.decide("followers counts: strategy skew (the join's hot keys)".into());
                Physical::Skew(hot.clone())
            }
            (_, StrategyParam::Shuffle) => {
                data.decide("followers counts: strategy shuffle (asked)".into());
                Physical::Shuffle
            }
            _ => {
                let auto = SkewParams {
                    strategy: StrategyParam::Auto,
                    ..skew.clone()
                };
                auto.plan_group(data, "followers counts", "follows", &[followee])
            }
        };
        let counted = InputSchema {
            name: "follows".into(),
            columns: vec!["follower".into(), "followee".into()],
        };
        let (aggs, _) = Aggregates::resolve(
            &AggSpec::parse_list("count").expect("count parses"),
            &counted,
        )?;
        Ok(Plan::new(
            vec![follows, posts],
            vec![
                OutputSchema {
                    name: "timeline".into(),
                    columns: vec!["follower".into(), "author".into(), "post".into()],
                    key: vec![0, 1, 2],
                },
                OutputSchema {
                    name: "follower_counts".into(),
                    columns: vec!["followee".into(), "followers".into()],
                    key: vec![0],
                },
            ],
            FollowersFlow { aggs, join, group },
        ))
    }
}

struct FollowersFlow {
    aggs: Aggregates,
    join: Physical,
    group: Physical,
}

impl Dataflow for FollowersFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        let (follows, posts) = (inputs.take("follows")?, inputs.take("posts")?);
        // follows rows are [follower, followee], posts rows [author, post].
        let columns = JoinColumns {
            left_key: vec![1],
            right_key: vec![0],
            right_rest: vec![1],
        };
        let timeline = follows.clone().relational_join_with(
            posts,
            columns,
            JoinKind::Inner,
            &self.join,
            context.updates,
        );
        let counts = follows.group_aggregate_with(
            vec![1],
            vec![],
            self.aggs.clone(),
            &self.group,
            context.updates,
        );
        Ok(Outputs::from([
            ("timeline", timeline),
            ("follower_counts", counts),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rows, run_job};

    fn run(extra: &[(&str, &str)]) -> Vec<Vec<Row>> {
        let follows =
            rows("u1,star\nu2,star\nu3,star\nu4,star\nu1,u2\nu2,u1\nu3,quiet\n,star\nu5,");
        let posts = rows("star,p1\nstar,p2\nu1,p3\nu2,p4\nnobody,p5");
        run_job(
            &Followers,
            extra,
            &["follower,followee", "author,post"],
            vec![follows, posts],
        )
    }

    #[test]
    fn fans_posts_out_and_counts_followers_with_every_strategy() {
        let out = run(&[("strategy", "shuffle")]);
        assert_eq!(
            out[0],
            rows(
                ",star,p1\n,star,p2\nu1,star,p1\nu1,star,p2\nu1,u2,p4\nu2,star,p1\nu2,star,p2\nu2,u1,p3\nu3,star,p1\nu3,star,p2\nu4,star,p1\nu4,star,p2"
            )
        );
        assert_eq!(out[1], rows(",1\nquiet,1\nstar,5\nu1,1\nu2,1"));
        for extra in [
            &[("strategy", "broadcast")][..],
            &[("strategy", "skew"), ("hot", "star")],
            &[("strategy", "skew"), ("hot", "star,u1"), ("salts", "7")],
            &[("strategy", "auto")],
        ] {
            assert_eq!(run(extra), out, "{extra:?}");
        }
    }
}
