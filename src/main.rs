//! The `toolbroker` binary: command-line dispatch and exit codes only.

use std::process::ExitCode;

use clap::Parser;
use toolbroker::{
    app::{self, App},
    cli::{Cli, Command, DemoServerArgs, DemoTransport, ServeArgs},
    client, config_file,
    demo_server::{self, HttpTransport},
    faces::mcp::stdio,
    login, telemetry,
};

/// Exit code for a config (or usage) mistake, as clap uses for usage errors.
const EXIT_CONFIG: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let role = match cli.command {
        Some(Command::DemoServer(_)) => telemetry::Role::McpServer,
        _ => telemetry::Role::Broker,
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("toolbroker: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Inside the runtime: the OTLP gRPC exporter needs it.
    let telemetry = runtime.block_on(async { telemetry::init(cli.log_format, role) });
    let code = runtime.block_on(run(cli.command.unwrap_or(Command::Serve(cli.serve))));
    telemetry.shutdown();
    // Do not wait for blocking tasks (e.g. a reaper waiting on a stubborn grandchild).
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

async fn run(command: Command) -> ExitCode {
    match command {
        Command::Serve(args) => serve(args).await,
        // The same checks as `serve`, files included, without binding or spawning anything.
        Command::Check(args) => {
            match config_file::load(&args.config).and_then(|loaded| App::build(loaded, None)) {
                Ok(app) => {
                    let count = app.config().servers.len();
                    let plural = if count == 1 { "" } else { "s" };
                    println!("{}: ok ({count} server{plural})", args.config.display());
                    ExitCode::SUCCESS
                }
                Err(e) => config_error(e),
            }
        }
        Command::DemoServer(args) => demo(args).await,
        Command::Tools(args) => report(client::list_tools(&args).await),
        Command::Search(args) => report(client::search(&args).await),
        Command::Call(args) => report(client::call(&args).await),
        Command::McpStdio(args) => match stdio::client_args(&args) {
            Ok(client) => report(stdio::serve(client, args.view.clone()).await),
            Err(e) => {
                eprintln!("toolbroker: {e}");
                ExitCode::from(EXIT_CONFIG)
            }
        },
        Command::Login(args) => match login::login(&args).await {
            Ok(()) => ExitCode::SUCCESS,
            // A config that does not allow the login is a config mistake.
            Err(e) => match e.downcast::<config_file::LoadError>() {
                Ok(e) => config_error(e),
                Err(e) => fatal(&e),
            },
        },
    }
}

async fn serve(args: ServeArgs) -> ExitCode {
    let app = match &args.config {
        Some(path) => config_file::load(path).and_then(|loaded| App::build(loaded, args.listen)),
        None => match config_file::demo() {
            Ok(loaded) => App::build(loaded, args.listen),
            Err(e) => return fatal(&e),
        },
    };
    match app {
        Ok(app) => report(app::serve(app).await),
        Err(e) => config_error(e),
    }
}

async fn demo(args: DemoServerArgs) -> ExitCode {
    let options = demo_server::DemoOptions {
        extra_tools: args.extra_tools,
        page_size: args.page_size,
        serial: args.serial,
        tasks: args.tasks,
    };
    let http = match args.transport {
        DemoTransport::Stdio => return report(demo_server::serve_stdio(options).await),
        DemoTransport::Sse => HttpTransport::Sse,
        DemoTransport::StreamableHttp => HttpTransport::StreamableHttp,
    };
    report(demo_server::serve_http(options, http, args.listen, args.bearer_token).await)
}

fn config_error(error: config_file::LoadError) -> ExitCode {
    eprintln!("{error}");
    ExitCode::from(EXIT_CONFIG)
}

fn fatal(error: &anyhow::Error) -> ExitCode {
    eprintln!("toolbroker: {error:#}");
    ExitCode::FAILURE
}

fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fatal(&e),
    }
}
