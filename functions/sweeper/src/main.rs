//! The `sweeper` Lambda function: due timers on its schedule, precise timers from the
//! doorbell queue ([`stm_lambda::run_sweeper`]).

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stm_lambda::run_sweeper().await
}
