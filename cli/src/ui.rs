//! `stm ui`: a local web console over the deployment the operator commands reach (moto,
//! `stm local`, real AWS). It lists executions, draws one with its statechart, trace and
//! children, and runs the control commands through the same control plane as the CLI
//! ([`crate::ops::apply_control`]).
//!
//! Served by `stm` itself, every asset built in. Only the operator who started it gets in:
//! it binds 127.0.0.1 by default and every request must carry the per-run token it prints
//! (in the URL once, then as a same-site cookie).

mod auth;
mod diagram;
mod html;
mod machine;
mod markup;
mod routes;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;

use crate::ops::{Connected, Deployment};

/// A local web console over the deployment: the executions, one drawn with its
/// statechart, trace and children, and the control commands. Serves 127.0.0.1 and
/// prints its URL, with the per-run token every request needs.
#[derive(Args, Debug, Clone)]
pub(crate) struct UiCommand {
    #[command(flatten)]
    args: UiArgs,
    #[command(flatten)]
    deployment: Deployment,
}

/// `stm ui`'s own flags (the deployment's are [`Deployment`]'s).
#[derive(Args, Debug, Clone)]
pub(crate) struct UiArgs {
    /// The port to serve on (0: any free one).
    #[arg(long, default_value_t = 8484, value_name = "P")]
    pub port: u16,
    /// The address to bind. Anything but a loopback address exposes the console (and its
    /// controls) to the network, guarded only by the token.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST), value_name = "ADDR")]
    pub bind: IpAddr,
    /// Open the console in the default browser (xdg-open).
    #[arg(long)]
    pub open: bool,
}

/// What every request handler shares.
pub(crate) struct Console {
    pub connected: Connected,
    /// The per-run secret a request must carry.
    pub token: String,
}

/// `stm ui`, until Ctrl-C.
pub(crate) fn start(command: UiCommand) -> Result<ExitCode> {
    // the handlers run on the server's tasks: each request takes the operator's role
    // there (`routes`), this scope covers the connection made first
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(stm_aws::as_function(
        "operator",
        serve(&command.deployment, &command.args),
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// Connect to the deployment, serve until Ctrl-C.
async fn serve(dep: &Deployment, args: &UiArgs) -> Result<()> {
    let connected = dep.connect(None).await?;
    let token = auth::new_token()?;
    let console = Arc::new(Console { connected, token });
    let address = SocketAddr::new(args.bind, args.port);
    let listener = tokio::net::TcpListener::bind(address).await.with_context(|| {
        format!("cannot listen on {address} (is another `stm ui` using the port? try --port 0)")
    })?;
    let bound = listener.local_addr()?;
    let url = format!("http://{bound}/?token={}", console.token);
    // one line on stdout, for a script to read; a closed stdout is no reason to stop
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "stm ui: serving the console at {url}").and_then(|()| stdout.flush());
    eprintln!("(Ctrl-C stops it; the token changes each run)");
    if !args.bind.is_loopback() {
        eprintln!(
            "warning: {} is not a loopback address: anyone who can reach it and has the URL can operate this deployment",
            args.bind
        );
    }
    if args.open {
        open_browser(&url);
    }
    axum::serve(listener, routes::router(console))
        .with_graceful_shutdown(async {
            // no signal handler (an unusual platform): serve until killed
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
        .await
        .context("the console's server stopped")?;
    Ok(())
}

/// `--open`: best effort, the URL is printed anyway.
fn open_browser(url: &str) {
    let opened = std::process::Command::new("xdg-open")
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match opened {
        // xdg-open returns at once, or when the browser does: wait for it off the server
        Ok(mut child) => {
            std::thread::spawn(move || {
                if let Ok(status) = child.wait() {
                    if !status.success() {
                        eprintln!("--open: xdg-open failed ({status}): open the URL above yourself");
                    }
                }
            });
        }
        Err(err) => eprintln!("--open: could not run xdg-open ({err}): open the URL above yourself"),
    }
}
