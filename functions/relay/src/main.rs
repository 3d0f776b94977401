//! The `relay` Lambda function (scheduled): the outbox and the spawn intents to the FIFO
//! queue ([`stm_lambda::run_relay`]).

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stm_lambda::run_relay().await
}
