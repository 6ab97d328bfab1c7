#!/usr/bin/env node
// Generates the TypeScript shapes of the API's JSON-form values, ts/api-types.ts, from the
// JSON Schemas in conformance/schema/api/ (the single source of every binding's typed
// shapes; conformance/tools/gen_python_types.py makes the Python package's _types.py
// from the same files), copies the message and API schemas into the package
// (schemas/, what loadSchema reads), and writes the exception classes, ts/errors.ts and
// ts/error-builders.ts, from the core's one error table (`errors::table_value()`, read
// through the built addon's `errorTable()`: build the addon first).
//
//   node scripts/gen-types.mjs [--native ADDON]          write them
//   node scripts/gen-types.mjs [--native ADDON] --check  exit 1 (naming what differs)
//                                                        when any is stale
//
// Mapping (the subset of JSON Schema the API schemas use; anything else is an error):
// a $defs object with properties -> an interface (required keys required, the others
// optional; descriptions -> doc comments); oneOf/anyOf of $refs -> a union alias; enum ->
// a union of literals, const -> a literal, a "null" member -> `| null`; array -> T[]
// (prefixItems with items: false -> a tuple); an object without properties ->
// Record<string, T>; {} -> unknown; $ref -> the referenced definition's name.
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const schemaRoot = resolve(root, '..', 'conformance', 'schema');
const apiDir = join(schemaRoot, 'api');
const OUTPUT = join(root, 'ts', 'api-types.ts');
const SHIPPED = join(root, 'schemas');

/** The schema files, in the order their sections appear (the Python generator's order). */
const AREAS = ['sequencing.json', 'session.json', 'adapter.json', 'contract.json', 'local.json', 'reducer.json'];

class SchemaError extends Error {}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** `text` in lines of at most `width` characters (words kept whole). */
function wrap(text, width) {
  const lines = [];
  let line = '';
  for (const w of text.split(/\s+/).filter((x) => x.length > 0)) {
    if (line.length > 0 && line.length + 1 + w.length > width) {
      lines.push(line);
      line = w;
    } else {
      line = line.length === 0 ? w : `${line} ${w}`;
    }
  }
  if (line.length > 0) lines.push(line);
  return lines;
}

function docComment(text, indent) {
  if (!text) return [];
  const pad = ' '.repeat(indent);
  const lines = wrap(text.replace(/\*\//g, '*\\/'), 92 - indent - 3);
  if (lines.length === 1 && pad.length + 7 + lines[0].length <= 92) return [`${pad}/** ${lines[0]} */`];
  return [`${pad}/**`, ...lines.map((l) => `${pad} * ${l}`), `${pad} */`];
}

class Generator {
  constructor() {
    this.docs = [];
    this.names = new Map();
    for (const area of AREAS) {
      const doc = JSON.parse(readFileSync(join(apiDir, area), 'utf8'));
      this.docs.push([area, doc]);
      for (const [name, d] of Object.entries(doc.$defs ?? {})) {
        if (d.title !== name) throw new SchemaError(`${area}#/$defs/${name}: title must be ${JSON.stringify(name)}`);
        if (this.names.has(name)) throw new SchemaError(`${area}: ${name} is also defined in ${this.names.get(name)}`);
        this.names.set(name, area);
      }
    }
    const extra = readdirSync(apiDir).filter((f) => f.endsWith('.json') && !AREAS.includes(f)).sort();
    if (extra.length > 0) throw new SchemaError(`schema files not listed in AREAS: ${extra.join(', ')}`);
  }

  ref(where, target) {
    const m = /^([A-Za-z0-9_.-]*)#\/\$defs\/([A-Za-z_][A-Za-z0-9_]*)$/.exec(target);
    if (m === null || !this.names.has(m[2])) throw new SchemaError(`${where}: unresolved $ref ${JSON.stringify(target)}`);
    if (m[1] && this.names.get(m[2]) !== m[1]) throw new SchemaError(`${where}: $ref ${JSON.stringify(target)} names the wrong file`);
    return m[2];
  }

  typeOf(where, s) {
    if (s === true) return 'unknown';
    if (typeof s !== 'object' || s === null) throw new SchemaError(`${where}: unsupported schema ${JSON.stringify(s)}`);
    const keys = Object.keys(s).filter((k) => k !== 'description' && k !== 'title');
    if (keys.length === 0) return 'unknown';
    if ('$ref' in s) return this.ref(where, s.$ref);
    for (const key of ['anyOf', 'oneOf']) {
      if (key in s) {
        const alts = s[key];
        const nullable = alts.some((a) => JSON.stringify(a) === '{"type":"null"}');
        const rest = alts.filter((a) => JSON.stringify(a) !== '{"type":"null"}').map((a, i) => this.typeOf(`${where}/${key}/${i}`, a));
        return [...rest, ...(nullable ? ['null'] : [])].join(' | ');
      }
    }
    if ('const' in s) return this.literal(where, s.const);
    if ('enum' in s) return s.enum.map((v) => (v === null ? 'null' : this.literal(where, v))).join(' | ');
    const ty = s.type;
    if (Array.isArray(ty)) {
      const rest = ty.filter((t) => t !== 'null');
      if (rest.length !== 1) throw new SchemaError(`${where}: unsupported type list ${JSON.stringify(ty)}`);
      const t = this.typeOf(where, { ...s, type: rest[0] });
      return ty.includes('null') ? `${this.paren(t)} | null` : t;
    }
    switch (ty) {
      case 'string':
        return 'string';
      case 'integer':
      case 'number':
        return 'number';
      case 'boolean':
        return 'boolean';
      case 'null':
        return 'null';
      case 'array':
        if ('prefixItems' in s) {
          if (s.items !== false) throw new SchemaError(`${where}: prefixItems needs items: false (a tuple)`);
          return `[${s.prefixItems.map((p, i) => this.typeOf(`${where}/prefixItems/${i}`, p)).join(', ')}]`;
        }
        return `${this.paren(this.typeOf(`${where}/items`, s.items ?? {}))}[]`;
      case 'object': {
        if ('properties' in s) throw new SchemaError(`${where}: inline objects with properties must be $defs`);
        const extra = s.additionalProperties ?? true;
        return `Record<string, ${extra === true ? 'unknown' : this.typeOf(`${where}/*`, extra)}>`;
      }
      default:
        throw new SchemaError(`${where}: unsupported schema ${JSON.stringify(s)}`);
    }
  }

  paren(t) {
    return /[|&]/.test(t) ? `(${t})` : t;
  }

  literal(where, v) {
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return JSON.stringify(v);
    throw new SchemaError(`${where}: unsupported literal ${JSON.stringify(v)}`);
  }

  iface(area, name, d) {
    const where = `${area}#/$defs/${name}`;
    const props = d.properties;
    const required = new Set(d.required ?? []);
    for (const k of required) if (!(k in props)) throw new SchemaError(`${where}: required key ${k} without a property`);
    const out = [...docComment(d.description ?? '', 0), `export interface ${name} {`];
    for (const [k, p] of Object.entries(props)) {
      out.push(...docComment(p?.description ?? '', 2));
      const key = IDENT.test(k) ? k : JSON.stringify(k);
      out.push(`  ${key}${required.has(k) ? '' : '?'}: ${this.typeOf(`${where}/properties/${k}`, p)};`);
    }
    if (d.additionalProperties !== undefined && d.additionalProperties !== false) {
      const extra = d.additionalProperties === true ? 'unknown' : this.typeOf(`${where}/*`, d.additionalProperties);
      out.push(`  [key: string]: ${extra};`);
    }
    out.push('}');
    return out;
  }

  alias(area, name, d) {
    const where = `${area}#/$defs/${name}`;
    const body = Object.fromEntries(Object.entries(d).filter(([k]) => k !== 'title' && k !== 'description'));
    return [...docComment(d.description ?? '', 0), `export type ${name} = ${this.typeOf(where, body)};`];
  }

  generate() {
    const sections = [];
    for (const [area, doc] of this.docs) {
      const head = [`// ${'-'.repeat(88)}`, `// ${doc.title ?? area}: conformance/schema/api/${area}`];
      if (doc.description) head.push(...wrap(doc.description, 89).map((l) => `// ${l}`));
      const blocks = [];
      for (const [name, d] of Object.entries(doc.$defs ?? {})) {
        blocks.push((d.type === 'object' && 'properties' in d ? this.iface(area, name, d) : this.alias(area, name, d)).join('\n'));
      }
      sections.push(`${head.join('\n')}\n\n${blocks.join('\n\n')}`);
    }
    return (
      '// GENERATED FILE - DO NOT EDIT. Generated by scripts/gen-types.mjs from the JSON Schemas in\n' +
      '// conformance/schema/api/ (the single source of the API\'s shapes, also of the Python\n' +
      '// package\'s _types.py). Regenerate after changing a schema: node scripts/gen-types.mjs\n' +
      '/* eslint-disable */\n\n' +
      `${sections.join('\n\n')}\n`
    );
  }
}

/** Every schema file under `base` (default conformance/schema/), relative to it. */
function schemaFiles(base = schemaRoot, dir = base, out = []) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) schemaFiles(base, p, out);
    else if (name.endsWith('.json')) out.push(relative(base, p));
  }
  return out;
}

/** The shipped copies that are missing, differ, or should not be there. */
function staleCopies() {
  const want = schemaFiles();
  const stale = [];
  for (const rel of want) {
    const target = join(SHIPPED, rel);
    if (!existsSync(target) || !readFileSync(target).equals(readFileSync(join(schemaRoot, rel)))) stale.push(rel);
  }
  if (existsSync(SHIPPED)) {
    for (const rel of schemaFiles(SHIPPED)) if (!want.includes(rel)) stale.push(`${rel} (not in conformance/schema)`);
  }
  return stale;
}

// ---------------------------------------------------------------------------------------
// The exception classes, from the core's error table. The table gives the classes, their
// parents (parents first) and docs; what each class carries besides `code` is this
// binding's own (the TypeScript types of the fields the native layer sends with the
// error, FIELDS below), as is the order of a class's constructor parameters (the parent's,
// then its own).

const ERRORS = join(root, 'ts', 'errors.ts');
const BUILDERS = join(root, 'ts', 'error-builders.ts');

/** Fields a class adds: [property, TS type, default, key in the native error body, doc]. */
const FIELDS = {
  DecodeError: [
    ['violations', 'Violation[]', '[]', 'violations', 'The violations (empty unless `code` is `schema_violation`).'],
    ['lines', 'string[]', '[]', 'lines', 'The error as human-readable lines, as the core words them.'],
  ],
  ConfigError: [['key', 'string', "''", 'key', 'The configuration key the core refused (dotted when nested).']],
  AdapterError: [
    ['details', 'Record<string, unknown>', '{}', 'details', "The core's JSON form of the error (`code` and its fields)."],
    ['lineNumber', 'number | null', 'null', 'line_number', 'The harness output line the error is about, or `null`.'],
  ],
  ReducerError: [['detailCode', 'string | null', 'null', 'detail_code', 'The code of the inner cause (`invalid_event`), or `null`.']],
  ContractError: [
    ['model', 'string', "''", 'model', 'The contract model concerned (empty when none).'],
    ['field', 'string', "''", 'field', 'The offending field (empty when none).'],
  ],
  ResolutionRefused: [['reasons', 'string[]', '[]', 'reasons', "The refusal reasons, in the core's order."]],
  TransportError: [['status', 'number | null', 'null', 'status', 'The HTTP status of a refused upgrade (`upgrade_refused`), else `null`.']],
};

const VIOLATION = `/** One schema violation: where, which rule, and a human-readable message. */
export interface Violation {
  /** Slash-separated path of the offending value (\`""\` is the frame itself). */
  location: string;
  /** The rule broken: \`required\`, \`type\`, \`const\`, \`min_length\`, \`minimum\`, \`range\`, ... */
  rule: string;
  /** Human-readable explanation (not stable; assert on \`location\` and \`rule\`). */
  message: string;
}`;

function loadTable() {
  const i = process.argv.indexOf('--native');
  const addon = i >= 0 ? resolve(process.argv[i + 1]) : join(root, 'stapel-runner-protocol.node');
  if (!existsSync(addon)) throw new Error(`no addon at ${addon}: build it first (npm run build)`);
  const native = createRequire(import.meta.url)(addon);
  return JSON.parse(native.errorTable());
}

function errorFiles(table) {
  const names = new Set();
  const own = new Map();
  const params = new Map(); // class -> constructor fields after code and message (inherited first)
  const out = [];
  for (const c of table.classes) {
    if (names.has(c.name)) throw new SchemaError(`error class ${c.name} twice`);
    if (c.parent !== null && !names.has(c.parent)) throw new SchemaError(`error class ${c.name}: parent ${c.parent} comes later`);
    if (!IDENT.test(c.name)) throw new SchemaError(`error class ${JSON.stringify(c.name)} is not an identifier`);
    names.add(c.name);
    const mine = FIELDS[c.name] ?? [];
    own.set(c.name, mine);
    const inherited = c.parent === null ? [] : params.get(c.parent);
    const all = [...inherited, ...mine];
    params.set(c.name, all);
    const lines = [...docComment(c.doc, 0)];
    if (c.parent === null) {
      lines.push(`export class ${c.name} extends Error {`, "  /** The core's stable snake_case error code. */", '  readonly code: string;');
    } else {
      lines.push(`export class ${c.name} extends ${c.parent} {`);
    }
    for (const [prop, type, , , doc] of mine) lines.push(...docComment(doc, 2), `  readonly ${prop}: ${type};`);
    if (c.parent === null || mine.length > 0) {
      const args = ['code: string', 'message: string', ...all.map(([prop, type, dflt]) => `${prop}: ${type} = ${dflt}`)];
      lines.push(`  constructor(${args.join(', ')}) {`);
      if (c.parent === null) {
        lines.push('    super(message);', '    this.name = new.target.name;', '    this.code = code;');
      } else {
        lines.push(`    super(${['code', 'message', ...inherited.map(([p]) => p)].join(', ')});`);
      }
      for (const [prop] of mine) lines.push(`    this.${prop} = ${prop};`);
      lines.push('  }');
    }
    if (lines[lines.length - 1].endsWith(' {')) lines[lines.length - 1] += '}';
    else lines.push('}');
    out.push(lines.join('\n'));
  }
  for (const name of Object.keys(FIELDS)) {
    if (!names.has(name)) throw new SchemaError(`FIELDS names ${name}, which the core's table does not have`);
  }
  const root_ = table.classes.find((c) => c.parent === null).name;
  const errors =
    "// GENERATED FILE - DO NOT EDIT. Generated by scripts/gen-types.mjs from the core's error\n" +
    "// table (errors::table_value(): every class, its parent and its doc). Regenerate after the\n" +
    '// table changes: node scripts/gen-types.mjs (after building the addon).\n' +
    '/* eslint-disable */\n\n' +
    `${VIOLATION}\n\n${out.join('\n\n')}\n\n` +
    "/** The class names of the core's table, parents first. */\n" +
    `export const ERROR_CLASS_NAMES: readonly string[] = Object.freeze([${table.classes.map((c) => `'${c.name}'`).join(', ')}]);\n`;
  const keys = [...new Set(Object.values(FIELDS).flat().map((f) => f[3]))].sort();
  const builders = [
    "// GENERATED FILE - DO NOT EDIT. Generated by scripts/gen-types.mjs from the core's error",
    '// table: how the TypeScript layer builds each class from the native error body (internal).',
    '/* eslint-disable */',
    `import * as E from './errors';`,
    '',
    '/** An error as the native layer throws it: the class the core\'s table names, and its fields. */',
    'export interface Carried {',
    '  class: string;',
    '  code: string;',
    '  message: string;',
    ...keys.map((k) => {
      const f = Object.values(FIELDS).flat().find((x) => x[3] === k);
      return `  ${k}?: ${f[1].replace(/\bViolation\b/, 'E.Violation')};`;
    }),
    '}',
    '',
    '/** The class of every name of the table, built from a carried error. */',
    `export const BUILDERS: Readonly<Record<string, (c: Carried) => E.${root_}>> = Object.freeze({`,
    ...table.classes.map((c) => {
      const args = ['c.code', 'c.message', ...params.get(c.name).map(([, , dflt, key]) => `c.${key} ?? ${dflt}`)];
      return `  ${c.name}: (c: Carried) => new E.${c.name}(${args.join(', ')}),`;
    }),
    '});',
    '',
  ].join('\n');
  return { errors, builders };
}

const text = new Generator().generate();
const { errors: errorsText, builders: buildersText } = errorFiles(loadTable());
const generated = [
  [OUTPUT, text],
  [ERRORS, errorsText],
  [BUILDERS, buildersText],
];
if (process.argv.includes('--check')) {
  const stale = staleCopies();
  const staleFiles = generated.filter(([p, t]) => (existsSync(p) ? readFileSync(p, 'utf8') : '') !== t).map(([p]) => relative(root, p));
  if (staleFiles.length === 0 && stale.length === 0) process.exit(0);
  for (const f of staleFiles) process.stderr.write(`${f} is stale\n`);
  if (stale.length > 0) process.stderr.write(`stale schema copies in schemas/: ${stale.join(', ')}\n`);
  process.stderr.write('regenerate: node scripts/gen-types.mjs\n');
  process.exit(1);
}
for (const [p, t] of generated) writeFileSync(p, t);
rmSync(SHIPPED, { recursive: true, force: true });
for (const rel of schemaFiles()) {
  mkdirSync(dirname(join(SHIPPED, rel)), { recursive: true });
  copyFileSync(join(schemaRoot, rel), join(SHIPPED, rel));
}
