//! Workloads as data: flow-size distributions ([`Cdf`], HPCC's format, with WebSearch and
//! FB_Hadoop shipped), the flows to start ([`FlowSpec`], HPCC's flow file), and seeded
//! generators of Poisson background traffic, incast bursts and permutations ([`generate`]).

pub mod cdf;
pub mod flows;
pub mod generate;

pub use cdf::{Cdf, CdfError, CdfErrorKind};
pub use flows::{FlowFileError, FlowFileErrorKind, FlowSpec, parse_flow_file, write_flow_file};
pub use generate::{
    GenerateError, Traffic, incast, incast_expected, permutation, poisson, poisson_expected,
};
