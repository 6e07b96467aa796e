{
  description = "sgard: checkpoint dotfiles into a portable repository and restore them anywhere";

  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";
    flake-utils.url = "github:numtide/flake-utils";
  };

  outputs = { self, nixpkgs, flake-utils }:
    flake-utils.lib.eachDefaultSystem (system:
      let
        pkgs = nixpkgs.legacyPackages.${system};
        cargoToml = builtins.fromTOML (builtins.readFile ./Cargo.toml);
        sgard = pkgs.rustPlatform.buildRustPackage {
          pname = "sgard";
          version = cargoToml.workspace.package.version;
          src = ./.;
          cargoLock.lockFile = ./Cargo.lock;
          # sgard and sgardd (the server package); the bench harness and the
          # simulation are not shipped.
          cargoBuildFlags = [ "--package" "sgard" "--package" "sgard-server" ];
          nativeBuildInputs = [ pkgs.installShellFiles ];
          postInstall = ''
            installShellCompletion --cmd sgard \
              --bash <($out/bin/sgard completion bash) \
              --zsh <($out/bin/sgard completion zsh) \
              --fish <($out/bin/sgard completion fish)
            $out/bin/sgard man --dir man
            installManPage man/*.1
          '';
          meta = with pkgs.lib; {
            description = cargoToml.package.description;
            license = licenses.mit;
            mainProgram = "sgard";
          };
        };
        # sgard.exe and sgardd.exe, cross-built with mingw-w64 from a Linux
        # host (`nix build .#sgard-windows`): what CI builds and runs under
        # wine. No completions or man pages: the host cannot run them.
        sgardWindows =
          let cross = pkgs.pkgsCross.mingwW64;
          in cross.rustPlatform.buildRustPackage {
            pname = "sgard-windows";
            version = cargoToml.workspace.package.version;
            src = ./.;
            cargoLock.lockFile = ./Cargo.lock;
            cargoBuildFlags = [ "--package" "sgard" "--package" "sgard-server" ];
            buildInputs = [ cross.windows.pthreads ];
            doCheck = false;
            meta = sgard.meta // { platforms = pkgs.lib.platforms.windows; };
          };
      in
      {
        packages = {
          sgard = sgard;
          default = sgard;
        } // pkgs.lib.optionalAttrs pkgs.stdenv.hostPlatform.isLinux {
          sgard-windows = sgardWindows;
        };
        apps.default = flake-utils.lib.mkApp { drv = sgard; };
        devShells.default = pkgs.mkShell {
          inputsFrom = [ sgard ];
          packages = with pkgs; [ cargo rustc clippy rustfmt rust-analyzer cargo-nextest ];
        };
      });
}
