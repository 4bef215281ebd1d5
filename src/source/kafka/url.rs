//! `kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?OPTIONS]`, parsed and checked.

use std::fmt;

use super::SCHEME;

/// How message values encode rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KafkaFormat {
    /// One JSON object per message, columns by name.
    Json,
    /// One CSV line per message, the `columns` in order, no header.
    Csv,
}

/// A Kafka input, as its URL gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaUrl {
    /// The bootstrap servers, comma-separated (`bootstrap.servers`).
    pub brokers: String,
    /// The topic.
    pub topic: String,
    /// How values encode rows.
    pub format: KafkaFormat,
    /// The message's columns, when given.
    pub columns: Option<Vec<String>>,
    /// A compacted topic read as a table.
    pub changelog: bool,
    /// The event-time column, when given.
    pub time: Option<String>,
}

impl KafkaUrl {
    /// Parses `text`; the error says what is wrong and what is expected.
    pub fn parse(text: &str) -> Result<KafkaUrl, String> {
        let expected = "expected kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?OPTIONS]";
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| format!("{text:?}: {expected}"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (brokers, topic) = path
            .split_once('/')
            .ok_or_else(|| format!("{text:?}: no topic: {expected}"))?;
        if brokers.is_empty() || brokers.split(',').any(|b| !is_host_port(b)) {
            return Err(format!(
                "{text:?}: brokers must be HOST:PORT[,HOST:PORT...]"
            ));
        }
        let topic = decode(topic)?;
        check_topic(&topic).map_err(|e| format!("{text:?}: {e}"))?;
        let mut url = KafkaUrl {
            brokers: brokers.to_string(),
            topic,
            format: KafkaFormat::Json,
            columns: None,
            changelog: false,
            time: None,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("{text:?}: option {pair:?} is not KEY=VALUE"))?;
            url.set(key, &decode(value)?)
                .map_err(|e| format!("{text:?}: {e}"))?;
        }
        if url.format == KafkaFormat::Csv && url.columns.is_none() {
            return Err(format!(
                "{text:?}: format=csv needs the columns of each line: add columns=a,b,c"
            ));
        }
        Ok(url)
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "format" => {
                self.format = match value {
                    "json" => KafkaFormat::Json,
                    "csv" => KafkaFormat::Csv,
                    _ => return Err(format!("format={value}: expected json or csv")),
                }
            }
            "columns" => {
                let columns: Vec<String> = value.split(',').map(str::to_string).collect();
                if columns.iter().any(String::is_empty) {
                    return Err(format!("columns={value}: an empty column name"));
                }
                self.columns = Some(columns);
            }
            "changelog" => {
                self.changelog = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(format!("changelog={value}: expected true or false")),
                }
            }
            "time" if !value.is_empty() => self.time = Some(value.to_string()),
            _ => {
                return Err(format!(
                    "unknown option {key}={value} (options: format, columns, changelog, time)"
                ));
            }
        }
        Ok(())
    }
}

impl fmt::Display for KafkaUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kafka topic {} at {}", self.topic, self.brokers)
    }
}

fn is_host_port(b: &str) -> bool {
    b.rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}

/// Kafka's own rule for topic names.
fn check_topic(topic: &str) -> Result<(), String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if topic.is_empty()
        || topic.len() > 249
        || !topic.chars().all(ok)
        || topic == "."
        || topic == ".."
    {
        return Err(format!(
            "{topic:?} is not a Kafka topic name (1 to 249 of a-z A-Z 0-9 . _ -)"
        ));
    }
    Ok(())
}

/// Percent-decoding of a URL component.
fn decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{text:?}: a bad %-escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{text:?}: %-escapes that are not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_url_parses() {
        let url = KafkaUrl::parse(
            "kafka://a:9092,b:9093/flights?format=csv&columns=k,v%20x&changelog=true&time=ts",
        )
        .unwrap();
        assert_eq!(url.brokers, "a:9092,b:9093");
        assert_eq!(url.topic, "flights");
        assert_eq!(url.format, KafkaFormat::Csv);
        assert_eq!(url.columns, Some(vec!["k".into(), "v x".into()]));
        assert!(url.changelog);
        assert_eq!(url.time.as_deref(), Some("ts"));
        let plain = KafkaUrl::parse("kafka://127.0.0.1:9092/t").unwrap();
        assert_eq!((plain.format, plain.changelog), (KafkaFormat::Json, false));
    }

    #[test]
    fn bad_urls_say_what_is_wrong() {
        for (url, says) in [
            ("kafka://h:1", "no topic"),
            ("kafka://h/t", "HOST:PORT"),
            ("kafka://h:1/t?format=avro", "expected json or csv"),
            ("kafka://h:1/t?format=csv", "add columns="),
            ("kafka://h:1/t?colums=a", "unknown option colums=a"),
            ("kafka://h:1/a b", "not a Kafka topic name"),
            ("kafka://h:1/t?changelog=yes", "expected true or false"),
            ("kafka://h:1/t?columns=a,,b", "empty column"),
        ] {
            let err = KafkaUrl::parse(url).unwrap_err();
            assert!(err.contains(says), "{url}: {err}");
        }
    }
}
