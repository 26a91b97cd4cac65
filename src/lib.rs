//! KernelFoundry facade
