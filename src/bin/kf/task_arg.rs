//! `--task NAME` or `--task-file T.toml`: `kernelfoundry::search::task::ChosenTask`.

pub(crate) use kernelfoundry::search::task::ChosenTask;
