//! Catalog rows are untrusted bytes too: a damaged or hand-edited file may
//! hold anything in them. Whatever text the JSON columns, the state and the
//! offsets hold, reading the catalog gives deployments whose outputs are
//! valid (names, columns, keys) or a `Corrupt` error, never a panic, and
//! nothing built from a row that failed the checks.

use proptest::prelude::*;

use super::tests::{commit, new_deployment, row, schema, store};
use super::*;
use crate::value::Value;

/// `text` with a few bytes overwritten, inserted or removed.
fn mutate(text: &str, edits: &[(usize, u8, u8)]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    crate::log::fuzz::edit(&mut bytes, edits);
    String::from_utf8_lossy(&bytes).into_owned()
}

const COLUMNS: &[&str] = &["params", "inputs", "outputs", "state", "lag", "late"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn damaged_catalog_rows_are_read_or_refused(
        column in 0..COLUMNS.len(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..5),
        next_offset in any::<i64>(),
        last_crc in any::<i64>(),
    ) {
        let (_dir, mut store) = store();
        let outputs = vec![schema("sessions", &["user", "n"], &[0])];
        let d = store.create_deployment(&new_deployment("sessionize", outputs, DeploymentState::Live)).unwrap();
        commit(&mut store, d.id, vec![vec![(row(&[Value::Int(1), Value::Int(2)]), 1)]], 1).unwrap();
        let column = COLUMNS[column];
        let text: String = store.conn.query_row(
            &format!("SELECT {column} FROM kappa_deployments WHERE id = ?1"), [d.id], |r| r.get(0)).unwrap();
        // The schema's own CHECK may refuse the damage (a bad state): then
        // there is nothing to read back.
        let _ = store.conn.execute(
            &format!("UPDATE kappa_deployments SET {column} = ?1 WHERE id = ?2"),
            rusqlite::params![mutate(&text, &edits), d.id]);
        store.conn.execute(
            "UPDATE kappa_offsets SET next_offset = ?1, last_crc = ?2 WHERE deployment = ?3",
            rusqlite::params![next_offset, last_crc, d.id]).unwrap();
        match store.deployment(d.id) {
            Ok(read) => {
                for o in &read.outputs {
                    prop_assert!(ident::check_output(&o.name).is_ok());
                    prop_assert!(o.key.iter().all(|&k| k < o.columns.len()));
                }
                for table in read.tables() {
                    let _ = store.read_page(&table, 10);
                }
            }
            Err(e) => prop_assert!(matches!(e, TableError::Corrupt { .. }), "{e}"),
        }
        let _ = store.deployments();
        let _ = store.input_offsets(d.id);
        let _ = store.offsets(d.id);
    }
}
