// Writes the README's conformance table from the summaries of one
// conformance/actiond.sh run, so the table says what the suite measured
// and cannot drift from it.
//
//   node conformance/table.mjs --reasons FILE SUMMARY.json...
//
// Each SUMMARY.json is one scripts/conformance.sh run (summarize.mjs wrote
// it). A scenario's verdict at a revision comes from the run that named it
// with --scenario when there is one (it ran against the server made for it),
// else from the revision's requirement run. A scenario that fails is shown
// as not offered only when FILE gives the seed's reason for it; without one
// it shows as failing, which is what the table must then say.
//
// Prints the table (Markdown) on stdout. Exit status 2 when the input
// cannot be read.

import { readFileSync } from 'node:fs';

const revisions = ['2025-11-25', '2026-07-28'];

try {
  const { reasons, summaries } = parseArguments(process.argv.slice(2));
  process.stdout.write(render(merge(summaries.map(read)), readReasons(reasons)));
} catch (error) {
  console.error(`conformance table: ${error.message}`);
  process.exitCode = 2;
}

function parseArguments(argv) {
  if (argv[0] !== '--reasons' || !argv[1] || argv.length < 3) {
    throw new Error('usage: table.mjs --reasons FILE SUMMARY.json...');
  }
  return { reasons: argv[1], summaries: argv.slice(2) };
}

function read(file) {
  const summary = JSON.parse(readFileSync(file, 'utf8'));
  if (!revisions.includes(summary.revision) || !Array.isArray(summary.scenarios)) {
    throw new Error(`${file} is not a summary of a 2025-11-25 or 2026-07-28 run`);
  }
  return summary;
}

// merge gives scenario -> {set, revision -> judged scenario}.
function merge(summaries) {
  const rows = new Map();
  const ordered = [...summaries].sort((a, b) => (a.mode === 'scenario') - (b.mode === 'scenario'));
  for (const summary of ordered) {
    for (const scenario of summary.scenarios) {
      const row = rows.get(scenario.name) ?? { set: setOf(scenario), at: {} };
      if (scenario.scoring !== 'not in the set' || !row.set) row.set = setOf(scenario);
      row.at[summary.revision] = scenario;
      rows.set(scenario.name, row);
    }
  }
  return rows;
}

function setOf(scenario) {
  if (scenario.name.startsWith('tasks-')) return 'The Tasks extension';
  if (scenario.name.startsWith('sep-2640-')) return 'The Skills extension';
  if (scenario.scoring === 'required') return 'Required';
  return 'Not scored yet by the suite';
}

function readReasons(file) {
  const reasons = new Map();
  readFileSync(file, 'utf8').split('\n').forEach((raw, index) => {
    const line = raw.replace(/#.*/, '').trim();
    if (!line) return;
    const match = /^([a-z0-9][a-z0-9-]*)\s+(.+)$/.exec(line);
    if (!match) throw new Error(`${file}:${index + 1}: "${line}" is not "scenario reason"`);
    reasons.set(match[1], match[2]);
  });
  return reasons;
}

// verdict says how a scenario fared; a scenario that passes most of its
// checks (server-stateless) says how many failed, so that its reason reads
// as the exception it is.
function verdict(scenario, explained) {
  switch (scenario.result) {
    case 'PASS':
      return 'passes';
    case 'WARN':
      return 'passes (warnings only)';
    case 'SKIP':
      return 'nothing to check';
    default: {
      const { SUCCESS = 0, FAILURE = 0 } = scenario.counts ?? {};
      const word = explained ? 'not offered' : '**fails**';
      return SUCCESS > FAILURE + 1 ? `passes all checks but ${FAILURE}: ${word}` : word;
    }
  }
}

function render(rows, reasons) {
  const sets = ['Required', 'Not scored yet by the suite', 'The Tasks extension', 'The Skills extension'];
  const lines = [];
  for (const set of sets) {
    const names = [...rows.keys()].filter((name) => rows.get(name).set === set).sort();
    if (names.length === 0) continue;
    lines.push(`**${set}**`, '', `| scenario | ${revisions.join(' | ')} | why not |`, `|---|${revisions.map(() => '---|').join('')}---|`);
    for (const name of names) {
      const row = rows.get(name);
      const reason = reasons.get(name);
      const cells = revisions.map((revision) => (row.at[revision] ? verdict(row.at[revision], reason !== undefined) : '—'));
      const failing = revisions.some((revision) => row.at[revision]?.result === 'FAIL');
      if (reason !== undefined && !failing) throw new Error(`${name} passes now: take its reason out of the reasons file`);
      const why = failing ? (reason ?? 'not explained: a regression?') : '';
      lines.push(`| ${name} | ${cells.join(' | ')} | ${why} |`);
    }
    lines.push('');
  }
  const unused = [...reasons.keys()].filter((name) => !rows.has(name));
  if (unused.length > 0) throw new Error(`reasons for scenarios the suite did not run: ${unused.join(', ')}`);
  return lines.join('\n');
}
