//! The `relay` Lambda function (entry point filled in by the Lambda functions issue).

fn main() {
    eprintln!("relay: not built yet; see the README");
    std::process::exit(1);
}
