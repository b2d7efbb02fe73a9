//! verbs-api (being written).
