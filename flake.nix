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
      in
      {
        packages.sgard = sgard;
        packages.default = sgard;
        apps.default = flake-utils.lib.mkApp { drv = sgard; };
        devShells.default = pkgs.mkShell {
          inputsFrom = [ sgard ];
          packages = with pkgs; [ cargo rustc clippy rustfmt rust-analyzer cargo-nextest ];
        };
      });
}
