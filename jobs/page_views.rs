//! `page-views`: click enrichment, the MapReduce classic — page-view events
//! joined with a users table, counted per user attribute.
//!
//! Inputs `views` (needs `user_id`; other columns ignored) and `users` (needs
//! `user_id` and the attribute column). Param `attr` (default `country`).
//! Output `page_views`: `ATTR,views`; key: `ATTR`. It is
//! `SELECT u.ATTR, count(*) FROM views v LEFT JOIN users u USING (user_id)
//! GROUP BY u.ATTR`: views of unknown users count under a null attribute,
//! so that no view is lost; a user listed twice counts their views twice,
//! as the SQL join would.

use crate::ops::aggregate::{AggSpec, Aggregates, GroupAggregate};
use crate::ops::join::{JoinColumns, JoinKind, RelationalJoin};
use crate::prelude::*;

pub struct PageViews;

impl Job for PageViews {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "page-views",
            version: 1,
            about: "Join page views with users and count views per user attribute",
            inputs: vec![
                InputSpec {
                    name: "views",
                    columns: &[("user_id", ColumnType::Any)],
                    format: None,
                    about: "page-view events",
                },
                InputSpec {
                    name: "users",
                    columns: &[("user_id", ColumnType::Any)],
                    format: None,
                    about: "users table with the attribute column",
                },
            ],
            params: vec![ParamSpec {
                name: "attr",
                default: Some("country"),
                help: "users column to count views by",
            }],
            outputs: vec![OutputSpec {
                name: "page_views",
                about: "ATTR, views",
            }],
        }
    }

    fn plan(
        &self,
        params: &Params,
        inputs: &Schemas,
        _data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        let attr = params.get("attr");
        let views = inputs.project("views")?;
        let users = inputs.project_with("users", &[(attr, ColumnType::Any)])?;
        // After the join, rows are [user_id, attr]: count them by attr.
        let joined = InputSchema {
            name: "joined".into(),
            columns: vec!["user_id".into(), attr.into()],
        };
        let (aggs, _) = Aggregates::resolve(
            &AggSpec::parse_list("count").expect("count parses"),
            &joined,
        )?;
        Ok(Plan::new(
            vec![views, users],
            vec![OutputSchema {
                name: "page_views".into(),
                columns: vec![attr.into(), "views".into()],
                key: vec![0],
            }],
            PageViewsFlow { aggs },
        ))
    }
}

struct PageViewsFlow {
    aggs: Aggregates,
}

impl Dataflow for PageViewsFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        _context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        let (views, users) = (inputs.take("views")?, inputs.take("users")?);
        let columns = JoinColumns {
            left_key: vec![0],
            right_key: vec![0],
            right_rest: vec![1],
        };
        let joined = views.relational_join(users, columns, JoinKind::Left);
        let counts = joined.group_aggregate(vec![1], vec![], self.aggs.clone());
        Ok(Outputs::from([("page_views", counts)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rows, run_job};

    #[test]
    fn counts_views_per_attribute_keeping_unknown_users() {
        let views = rows("/a,1\n/b,1\n/a,2\n/c,3\n/d,9\n/e,");
        let users = rows("1,fr,x\n2,de,y\n3,fr,z\n4,it,w");
        let out = run_job(
            &PageViews,
            &[],
            &["url,user_id", "user_id,country,name"],
            vec![views, users],
        );
        assert_eq!(out[0], rows(",2\nde,1\nfr,3"));
    }
}
