// Builds dist/esm and dist/cjs from one source. Each gets a package.json
// naming its module type, since the package's own "type" is module.
import { execFileSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = join(pkg, "node_modules/typescript/bin/tsc");
rmSync(join(pkg, "dist"), { recursive: true, force: true });
for (const [cfg, type] of [["tsconfig.build.json", "module"], ["tsconfig.cjs.json", "commonjs"]]) {
  execFileSync(process.execPath, [tsc, "-p", join(pkg, cfg)], { stdio: "inherit", cwd: pkg });
  writeFileSync(join(pkg, "dist", type === "module" ? "esm" : "cjs", "package.json"), JSON.stringify({ type }) + "\n");
}
console.log("built dist/esm and dist/cjs");
