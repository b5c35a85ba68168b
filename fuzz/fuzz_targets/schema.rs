//! `domain::schema::params_from_schema` on any JSON object: the module promises a result for
//! any input, however malformed, within its depth and node bounds (a hang is a failure too).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolbroker::domain::schema::{MAX_DEPTH, Param, params_from_schema};

/// How deep a param tree goes: the conversion stops nesting at `MAX_DEPTH`.
fn depth(params: &[Param]) -> usize {
    params
        .iter()
        .map(|p| {
            let items = p.items.as_deref().map_or(0, |i| depth(std::slice::from_ref(i)));
            1 + depth(&p.properties).max(items)
        })
        .max()
        .unwrap_or(0)
}

fuzz_target!(|data: &[u8]| {
    let Ok(Value::Object(schema)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let params = params_from_schema(&schema);
    // Refs and unions are expanded within the same budget: no tree is deeper than the cap.
    assert!(depth(&params) <= MAX_DEPTH, "depth {}", depth(&params));
});
