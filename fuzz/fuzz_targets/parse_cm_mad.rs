#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| roce_wire::fuzzing::parse_cm_mad(data));
