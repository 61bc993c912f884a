#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| roce_core::fuzzing::nic_ingress(data));
