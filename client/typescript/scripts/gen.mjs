// Generates src/gen/ from the repository's proto/docketv1 with protoc and
// ts-proto. With --check it generates into a temporary directory and fails
// when the committed src/gen/ differs: a proto change that was not
// regenerated is caught by npm test and CI.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, existsSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
// --proto DIR reads the .proto files from another copy of proto/ (the
// test that shows the check catches an added field uses it).
const protoArg = process.argv.indexOf("--proto");
const repoProto = protoArg > 0 ? resolve(process.argv[protoArg + 1]) : resolve(pkg, "../../proto");
const localProto = join(pkg, "proto");
const committed = join(pkg, "src/gen");
const check = process.argv.includes("--check");

const protoFiles = [
  ...readdirSync(join(repoProto, "docketv1")).filter((f) => f.endsWith(".proto")).sort().map((f) => `docketv1/${f}`),
  "google/rpc/status.proto",
];

// Options are the package's contract with its generated code:
// - bigint for 64-bit fields: fences are uint64 and times Unix ns, both
//   beyond Number.MAX_SAFE_INTEGER;
// - grpc-js service clients; .js import suffixes so the same files compile
//   to ESM (Node's resolver needs the suffix) and to CommonJS;
// - no protoc version in the header, so a developer's protoc patch release
//   does not make the stubs look stale.
const opts = [
  "esModuleInterop=true",
  "env=node",
  "forceLong=bigint",
  "outputServices=grpc-js",
  "importSuffix=.js",
  "useExactTypes=false",
  "oneof=unions-value",
  "emitImportedFiles=true",
  "outputJsonMethods=false",
  "outputTypeRegistry=false",
  "annotateFilesWithVersion=false",
].join(",");

function generate(out) {
  mkdirSync(out, { recursive: true });
  const plugin = join(pkg, "node_modules/.bin/protoc-gen-ts_proto");
  if (!existsSync(plugin)) throw new Error("ts-proto is missing: run npm ci first");
  try {
    execFileSync("protoc", [
      `--plugin=protoc-gen-ts_proto=${plugin}`,
      `--ts_proto_out=${out}`,
      `--ts_proto_opt=${opts}`,
      `-I${repoProto}`,
      `-I${localProto}`,
      "-I/usr/include",
      ...protoFiles,
    ], { stdio: ["ignore", "inherit", "inherit"] });
  } catch (e) {
    if (e.code === "ENOENT") throw new Error("protoc is missing: apt-get install -y protobuf-compiler");
    throw e;
  }
}

function files(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...files(p));
    else out.push(p);
  }
  return out;
}

if (!check) {
  rmSync(committed, { recursive: true, force: true });
  generate(committed);
  console.log(`generated ${files(committed).length} files in ${relative(process.cwd(), committed) || "."}`);
} else {
  const tmp = mkdtempSync(join(tmpdir(), "docket-gen-"));
  try {
    generate(tmp);
    const want = new Map(files(tmp).map((p) => [relative(tmp, p), readFileSync(p, "utf8")]));
    const have = existsSync(committed) ? new Map(files(committed).map((p) => [relative(committed, p), readFileSync(p, "utf8")])) : new Map();
    const stale = [];
    for (const [name, text] of want) if (have.get(name) !== text) stale.push(name);
    for (const name of have.keys()) if (!want.has(name)) stale.push(name);
    if (stale.length > 0) {
      console.error(`generated stubs are stale against proto/ (${stale.join(", ")}): run make proto-ts (or npm run gen) and commit src/gen`);
      // Not process.exit here: the temporary directory must go first.
      process.exitCode = 1;
    } else {
      console.log(`generated stubs match proto/ (${want.size} files)`);
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
