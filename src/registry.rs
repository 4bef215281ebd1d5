//! The jobs a program knows: the built-in ones, a user's own, or both.
//! Every command looks jobs up here by name; nothing else lists them.
//!
//! Invariant: names are unique ([`Registry::check`] refuses a second job
//! with a name already taken), so a deployment's job name always means one
//! job.

use std::sync::Arc;

use thiserror::Error;

use crate::job::Job;

/// A set of jobs, by name.
#[derive(Clone, Default)]
pub struct Registry {
    jobs: Vec<Arc<dyn Job>>,
}

/// A job name that is not in the registry.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("unknown job {name:?} (jobs: {known})")]
pub struct UnknownJob {
    /// The name asked for.
    pub name: String,
    /// The names there are, comma-separated.
    pub known: String,
}

/// Why the job of a deployment cannot be had.
#[derive(Debug, Error)]
pub enum DeployedJobError {
    /// No job of that name.
    #[error(transparent)]
    Unknown(#[from] UnknownJob),
    /// The SQL job's recorded query does not parse (a newer program's SQL).
    #[error("the deployment's SQL query: {0}")]
    Sql(#[from] crate::sql::SqlError),
}

/// Two jobs with the same name.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("two jobs are named {0:?}: job names must be unique")]
pub struct DuplicateJob(pub String);

impl Registry {
    /// No jobs.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// The built-in jobs (`kappa jobs` lists them).
    pub fn builtin() -> Registry {
        Registry {
            jobs: crate::jobs::builtin(),
        }
    }

    /// Adds `job`.
    pub fn add(&mut self, job: Arc<dyn Job>) {
        self.jobs.push(job);
    }

    /// Adds the built-in jobs.
    pub fn add_builtin(&mut self) {
        self.jobs.extend(crate::jobs::builtin());
    }

    /// The job named `name`.
    pub fn find(&self, name: &str) -> Result<Arc<dyn Job>, UnknownJob> {
        self.jobs
            .iter()
            .find(|j| j.spec().name == name)
            .cloned()
            .ok_or_else(|| UnknownJob {
                name: name.to_string(),
                known: self.names().join(", "),
            })
    }

    /// The job a deployment ran: by name, or for a SQL job (whose name is
    /// [`crate::sql::JOB_NAME`]) rebuilt from the query it recorded.
    pub fn find_deployed(
        &self,
        name: &str,
        params: &[(String, String)],
    ) -> Result<Arc<dyn Job>, DeployedJobError> {
        if name == crate::sql::JOB_NAME {
            return Ok(Arc::new(crate::sql::SqlJob::from_params(params)?));
        }
        Ok(self.find(name)?)
    }

    /// The jobs, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Job>> {
        self.jobs.iter()
    }

    /// The jobs' names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.jobs.iter().map(|j| j.spec().name).collect()
    }

    /// Refuses two jobs with one name.
    pub fn check(&self) -> Result<(), DuplicateJob> {
        let names = self.names();
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(DuplicateJob(name.to_string()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_jobs_by_name_and_refuses_duplicates() {
        let mut registry = Registry::builtin();
        assert!(registry.check().is_ok());
        assert_eq!(registry.find("count-by").unwrap().spec().name, "count-by");
        let unknown = registry.find("nope").err().unwrap();
        assert!(unknown.to_string().contains("count-by"), "{unknown}");
        registry.add_builtin();
        assert_eq!(registry.check(), Err(DuplicateJob("group-by".to_string())));
    }
}
