//! Where a table store is: a SQLite file's path, or a PostgreSQL URL
//! (`postgresql://USER[:PASSWORD]@HOST:PORT/DB[?OPTIONS]`, libpq's form).
//!
//! Invariant: a password never leaves this module in text meant for people.
//! [`StoreAddr`]'s `Display` (what every message, log line and status page
//! prints) masks it, in the URL's user part and in a `password=` option;
//! only [`PgAddr::conninfo`] hands the real URL to the client.
//!
//! Some options are taken out before the URL reaches the client, which does
//! not know them:
//! - `schema=NAME`, kappa's own: the schema of the output tables and their
//!   views (default `public`). The catalog is always in schema `kappa`.
//! - libpq's TLS options, with libpq's meaning: `sslmode=disable|prefer|
//!   require|verify-ca|verify-full` (default `prefer`: TLS when the server
//!   offers it; `prefer` and `require` do not check the certificate,
//!   `verify-ca` checks it against the root certificates, `verify-full`
//!   also checks the host name), `sslrootcert=PATH` (PEM; else the system's
//!   roots), and a client certificate `sslcert=PATH` with `sslkey=PATH`
//!   (PEM, the key in PKCS#8).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::TableError;
use super::ident;

/// A table store's address, as `--table-db` and `$KAPPA_TABLE_DB` give it.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreAddr {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres(PgAddr),
}

/// A PostgreSQL database's URL, with kappa's own option taken out.
#[derive(Clone, PartialEq, Eq)]
pub struct PgAddr {
    /// The URL the client connects with (secret: it may hold a password).
    url: String,
    /// The schema of the output tables and views.
    schema: String,
    /// How the connection is encrypted and the server checked.
    tls: Tls,
    /// The options taken out of the URL, as given, for display.
    taken: Vec<String>,
}

/// libpq's `sslmode` and certificate files (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tls {
    /// `sslmode`.
    pub mode: TlsMode,
    /// `sslrootcert`: the roots a server certificate is checked against.
    pub root_cert: Option<PathBuf>,
    /// `sslcert` and `sslkey`: a client certificate and its key.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// libpq's `sslmode` values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsMode {
    /// Never TLS.
    Disable,
    /// TLS when the server offers it; the certificate is not checked.
    #[default]
    Prefer,
    /// TLS or no connection; the certificate is not checked.
    Require,
    /// TLS, with the certificate checked against the roots.
    VerifyCa,
    /// TLS, with the certificate checked, host name included.
    VerifyFull,
}

impl PgAddr {
    /// The URL for the client, password included. Never print it.
    pub fn conninfo(&self) -> &str {
        &self.url
    }

    /// The schema of the output tables and views.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The TLS settings.
    pub fn tls(&self) -> &Tls {
        &self.tls
    }
}

impl StoreAddr {
    /// Parses `--table-db`: a `postgres://` or `postgresql://` URL, or a path.
    pub fn parse(text: &str) -> Result<StoreAddr, TableError> {
        let lower = text.to_ascii_lowercase();
        if !(lower.starts_with("postgresql://") || lower.starts_with("postgres://")) {
            return Ok(StoreAddr::Sqlite(PathBuf::from(text)));
        }
        let (base, query) = text.split_once('?').unwrap_or((text, ""));
        let bad = |reason: String| TableError::BadAddress {
            addr: mask(text),
            reason,
        };
        let mut schema = "public".to_string();
        let mut tls = Tls::default();
        let (mut cert, mut key) = (None, None);
        let (mut kept, mut taken) = (Vec::new(), Vec::new());
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "schema" => schema = v.to_string(),
                "sslmode" => {
                    tls.mode = match v {
                        "disable" => TlsMode::Disable,
                        "prefer" => TlsMode::Prefer,
                        "require" => TlsMode::Require,
                        "verify-ca" => TlsMode::VerifyCa,
                        "verify-full" => TlsMode::VerifyFull,
                        other => {
                            return Err(bad(format!(
                                "sslmode '{other}' is not one of disable, prefer, require, verify-ca, verify-full"
                            )));
                        }
                    }
                }
                "sslrootcert" => tls.root_cert = Some(PathBuf::from(v)),
                "sslcert" => cert = Some(PathBuf::from(v)),
                "sslkey" => key = Some(PathBuf::from(v)),
                _ => {
                    kept.push(pair);
                    continue;
                }
            }
            if k != "schema" {
                taken.push(pair.to_string());
            }
        }
        tls.client_cert = match (cert, key) {
            (Some(c), Some(k)) => Some((c, k)),
            (None, None) => None,
            _ => return Err(bad("sslcert and sslkey go together".into())),
        };
        ident::check("schema", &schema)?;
        let url = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        if let Err(e) = postgres::Config::from_str(&url) {
            return Err(bad(e.to_string()));
        }
        Ok(StoreAddr::Postgres(PgAddr {
            url,
            schema,
            tls,
            taken,
        }))
    }

    /// The SQLite file, if that is what it is.
    pub fn path(&self) -> Option<&Path> {
        match self {
            StoreAddr::Sqlite(p) => Some(p),
            StoreAddr::Postgres(_) => None,
        }
    }

    /// Itself, for `format!("{}", addr.display())` at call sites that
    /// printed a path before.
    pub fn display(&self) -> &StoreAddr {
        self
    }
}

impl FromStr for StoreAddr {
    type Err = TableError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StoreAddr::parse(s)
    }
}

impl From<&Path> for StoreAddr {
    fn from(p: &Path) -> StoreAddr {
        StoreAddr::Sqlite(p.to_path_buf())
    }
}

impl From<PathBuf> for StoreAddr {
    fn from(p: PathBuf) -> StoreAddr {
        StoreAddr::Sqlite(p)
    }
}

impl fmt::Display for StoreAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreAddr::Sqlite(p) => write!(f, "{}", p.display()),
            StoreAddr::Postgres(pg) => f.write_str(&pg.to_string()),
        }
    }
}

impl fmt::Display for PgAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut options = self.taken.clone();
        if self.schema != "public" {
            options.push(format!("schema={}", self.schema));
        }
        f.write_str(&mask(&self.url))?;
        for (i, o) in options.iter().enumerate() {
            let sep = if i == 0 && !self.url.contains('?') {
                '?'
            } else {
                '&'
            };
            write!(f, "{sep}{o}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for StoreAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreAddr({self})")
    }
}

impl fmt::Debug for PgAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgAddr({self})")
    }
}

/// The URL with its password (in the user part or a `password=` option)
/// replaced by `***`.
pub fn mask(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let mut out = match base.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            let authority = match authority.rsplit_once('@') {
                Some((user, host)) => match user.split_once(':') {
                    Some((name, _)) => format!("{name}:***@{host}"),
                    None => format!("{user}@{host}"),
                },
                None => authority.to_string(),
            };
            format!("{scheme}://{authority}{path}")
        }
        None => base.to_string(),
    };
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_urls_are_told_apart() {
        assert_eq!(
            StoreAddr::parse("kappa-data/tables.db").unwrap(),
            StoreAddr::Sqlite("kappa-data/tables.db".into())
        );
        let StoreAddr::Postgres(pg) =
            StoreAddr::parse("postgresql://app@db:5432/shop?schema=serving&sslmode=require")
                .unwrap()
        else {
            panic!("a URL")
        };
        assert_eq!(pg.schema(), "serving");
        assert_eq!(pg.conninfo(), "postgresql://app@db:5432/shop");
        assert_eq!(pg.tls().mode, TlsMode::Require);
        assert_eq!(
            pg.to_string(),
            "postgresql://app@db:5432/shop?sslmode=require&schema=serving"
        );
        let StoreAddr::Postgres(pg) = StoreAddr::parse(
            "postgres://h/db?sslmode=verify-full&sslrootcert=/ca.pem&connect_timeout=3",
        )
        .unwrap() else {
            panic!("a URL")
        };
        assert_eq!(pg.tls().mode, TlsMode::VerifyFull);
        assert_eq!(pg.tls().root_cert.as_deref(), Some(Path::new("/ca.pem")));
        assert_eq!(pg.conninfo(), "postgres://h/db?connect_timeout=3");
        let err = StoreAddr::parse("postgres://h/db?sslmode=always").unwrap_err();
        assert!(err.to_string().contains("sslmode 'always'"), "{err}");
        assert!(StoreAddr::parse("postgres://h/db?sslcert=/c.pem").is_err());
        let err = StoreAddr::parse("postgres://h/db?schema=a;b").unwrap_err();
        assert!(err.to_string().contains("a;b"), "{err}");
        let err = StoreAddr::parse("postgres://h/db?nonsense=1").unwrap_err();
        assert!(err.to_string().contains("nonsense"), "{err}");
    }

    #[test]
    fn passwords_are_never_printed() {
        let url = "postgresql://app:s3cret@db:5432/shop?password=other&sslmode=require";
        let addr = StoreAddr::parse(url).unwrap();
        for text in [addr.to_string(), format!("{addr:?}"), mask(url)] {
            assert!(
                !text.contains("s3cret") && !text.contains("other"),
                "{text}"
            );
            assert!(text.contains("app:***@db:5432/shop"), "{text}");
        }
        let err = StoreAddr::parse("postgres://app:s3cret@h/db?bad=1").unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
        assert_eq!(mask("postgres://app@h/db"), "postgres://app@h/db");
    }
}
