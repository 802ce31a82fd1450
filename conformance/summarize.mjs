// Summarises one run of the MCP conformance suite for scripts/conformance.sh.
//
// Reads <results>/raw/server-<scenario>-<timestamp>/checks.json as the suite
// wrote them, judges each scenario, checks the expected-pass list, prints the
// summary, and writes summary.json and summary.txt beside raw/.
//
// A scenario fails when any of its checks is FAILURE, as the suite's own
// requirement scoring counts it; WARNING (a SHOULD) and SKIPPED do not fail it.
//
// Exit status: 0 when every expected-pass entry passed, 1 when one failed or
// did not run, 2 when the run cannot be judged (no results, bad list file).

import { readFileSync, readdirSync, writeFileSync, existsSync } from 'node:fs';
import { join, basename } from 'node:path';
import { createRequire } from 'node:module';

const options = parseArguments(process.argv.slice(2));
try {
  process.exitCode = main(options);
} catch (error) {
  console.error(`conformance summary: ${error.message}`);
  process.exitCode = 2;
}

function main({ results, revision, expected, suite, mode, url, shown }) {
  const scenarios = readScenarios(join(results, 'raw'));
  if (scenarios.size === 0) {
    throw new Error(`no checks.json under ${join(results, 'raw')}: the suite produced no results (see ${join(results, 'suite-output.txt')})`);
  }
  const scoring = readScoring(suite, revision);
  const entries = readExpected(expected);
  const suiteVersion = readSuiteVersion(suite);

  const judged = [...scenarios.entries()].map(([name, checks]) => judge(name, checks, scoring));
  const verdicts = entries.map((entry) => verdictFor(entry, scenarios, mode, revision));
  const listed = new Set(entries.filter((entry) => !entry.check).map((entry) => entry.scenario));
  // SKIP is left out: a scenario that checked nothing proves nothing.
  const unlisted = judged
    .filter((s) => (s.result === 'PASS' || s.result === 'WARN') && !listed.has(s.name))
    .map((s) => s.name);
  const failedExpectations = verdicts.filter((v) => v.verdict === 'fail');
  const exitCode = failedExpectations.length > 0 ? 1 : 0;

  const text = render({ revision, url, suiteVersion, mode, expected: shown || expected, judged, verdicts, unlisted, scoring });
  const summary = {
    revision,
    url,
    mode,
    suiteVersion,
    judgedAt: new Date().toISOString(),
    rule: 'a scenario fails when any check is FAILURE; WARNING and SKIPPED do not fail it',
    scenarios: judged,
    expectedFile: expected,
    expected: verdicts,
    passingButUnlisted: unlisted,
    exitCode
  };
  writeFileSync(join(results, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');
  writeFileSync(join(results, 'summary.txt'), text);
  process.stdout.write(text);
  return exitCode;
}

function parseArguments(argv) {
  const parsed = { mode: 'requirements', url: '', shown: '' };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!['results', 'revision', 'expected', 'shown', 'suite', 'mode', 'url'].includes(key) || argv[i + 1] === undefined) {
      console.error(`conformance summary: unknown or incomplete option ${argv[i]}`);
      process.exit(2);
    }
    parsed[key] = argv[i + 1];
  }
  for (const key of ['results', 'revision', 'expected', 'suite']) {
    if (!parsed[key]) {
      console.error(`conformance summary: --${key} is required`);
      process.exit(2);
    }
  }
  return parsed;
}

// The suite names each result folder server-<scenario>-<ISO timestamp with
// dashes>; scenario names themselves contain dashes, so strip the timestamp.
function readScenarios(rawDirectory) {
  const scenarios = new Map();
  if (!existsSync(rawDirectory)) return scenarios;
  for (const folder of readdirSync(rawDirectory).sort()) {
    const file = join(rawDirectory, folder, 'checks.json');
    if (!existsSync(file)) continue;
    const name = basename(folder)
      .replace(/^server-/, '')
      .replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '');
    const checks = JSON.parse(readFileSync(file, 'utf8'));
    scenarios.set(name, [...(scenarios.get(name) ?? []), ...checks]);
  }
  return scenarios;
}

function readScoring(suite, revision) {
  const scoring = new Map();
  const file = join(suite, 'requirements', `${revision}.yaml`);
  if (!existsSync(file)) return scoring;
  const yaml = createRequire(join(suite, 'package.json'))('yaml');
  const set = yaml.parse(readFileSync(file, 'utf8'));
  for (const name of set.server ?? []) scoring.set(name, 'required');
  for (const entry of set.not_scored ?? []) {
    if (entry.leg === 'server') scoring.set(entry.scenario, `not scored (${entry.reason})`);
  }
  return scoring;
}

function readSuiteVersion(suite) {
  return JSON.parse(readFileSync(join(suite, 'package.json'), 'utf8')).version;
}

function readExpected(file) {
  if (!existsSync(file)) {
    throw new Error(`expected-pass list ${file} does not exist; create it (it may be empty)`);
  }
  const entries = [];
  readFileSync(file, 'utf8').split('\n').forEach((raw, index) => {
    const line = raw.replace(/#.*/, '').trim();
    if (!line) return;
    const match = /^([a-z0-9][a-z0-9-]*)(?::(\S+))?$/.exec(line);
    if (!match) {
      throw new Error(`${file}:${index + 1}: "${line}" is not "scenario" or "scenario:check-id"`);
    }
    entries.push({ entry: line, scenario: match[1], check: match[2] });
  });
  return entries;
}

function judge(name, checks, scoring) {
  const counts = { SUCCESS: 0, FAILURE: 0, WARNING: 0, SKIPPED: 0, INFO: 0 };
  for (const check of checks) counts[check.status] = (counts[check.status] ?? 0) + 1;
  // The suite adds wire-schema checks to every scenario; alone they show the
  // messages were well formed, not that the scenario's requirements held.
  const exercised = checks.some((check) => check.status === 'SUCCESS' && !check.id.startsWith('wire-schema-'));
  const result = counts.FAILURE > 0 ? 'FAIL' : counts.WARNING > 0 ? 'WARN' : exercised ? 'PASS' : 'SKIP';
  const problems = checks
    .filter((check) => check.status === 'FAILURE' || check.status === 'WARNING')
    .map((check) => ({ id: check.id, status: check.status, message: check.errorMessage ?? check.description ?? '' }));
  return { name, result, scoring: scoring.get(name) ?? 'not in the set', counts, problems };
}

function verdictFor(entry, scenarios, mode, revision) {
  const checks = scenarios.get(entry.scenario);
  if (!checks) {
    // A --scenario run covers only what it named; a requirements run covers
    // the whole set, so an entry it never ran is a typo or a stale entry.
    if (mode === 'scenario') return { ...entry, verdict: 'not run', reason: 'scenario not part of this invocation' };
    return { ...entry, verdict: 'fail', reason: `scenario did not run: it is not in the ${revision} set` };
  }
  const relevant = entry.check ? checks.filter((check) => check.id === entry.check) : checks;
  if (relevant.length === 0) {
    return { ...entry, verdict: 'fail', reason: `check ${entry.check} was not emitted` };
  }
  const failed = relevant.find((check) => check.status === 'FAILURE');
  if (failed) {
    return { ...entry, verdict: 'fail', reason: `${failed.id}: ${clip(failed.errorMessage ?? 'FAILURE')}` };
  }
  return { ...entry, verdict: 'pass' };
}

function render({ revision, url, suiteVersion, mode, expected, judged, verdicts, unlisted, scoring }) {
  const lines = [];
  lines.push(`MCP conformance ${revision} (suite ${suiteVersion}, ${mode}) against ${url}`);
  lines.push('');
  const width = Math.max(...judged.map((s) => s.name.length), 8);
  lines.push(`${'scenario'.padEnd(width)}  result  pass/fail/warn/skip  scoring`);
  const order = (s) => (s.scoring === 'required' ? 0 : s.scoring.startsWith('not scored') ? 1 : 2);
  for (const s of [...judged].sort((a, b) => order(a) - order(b))) {
    const c = s.counts;
    const tally = `${c.SUCCESS}/${c.FAILURE}/${c.WARNING}/${c.SKIPPED}`;
    lines.push(`${s.name.padEnd(width)}  ${s.result.padEnd(6)}  ${tally.padEnd(19)}  ${s.scoring}`);
  }

  const problems = judged.filter((s) => s.problems.length > 0);
  if (problems.length > 0) {
    lines.push('', 'Failures (F) and warnings (W):');
    for (const s of problems) {
      for (const p of s.problems) {
        lines.push(`  ${p.status === 'FAILURE' ? 'F' : 'W'} ${s.name}: ${p.id}: ${clip(p.message)}`);
      }
    }
  }

  const required = judged.filter((s) => s.scoring === 'required');
  if (scoring.size > 0 && mode === 'requirements') {
    const passing = required.filter((s) => s.result !== 'FAIL').length;
    lines.push('', `Required by ${revision}: ${passing} of ${required.length} scenarios pass (WARN counts as pass, as the suite scores it).`);
  }
  if (unlisted.length > 0) {
    lines.push('', `Passing but not listed in ${expected} (add them once they should stay green):`);
    lines.push(...wrap(unlisted, 100).map((line) => `  ${line}`));
  }
  const failedExpectations = verdicts.filter((v) => v.verdict === 'fail');
  const passedExpectations = verdicts.filter((v) => v.verdict === 'pass');
  const notRun = verdicts.filter((v) => v.verdict === 'not run');
  lines.push('', `Expected-pass list ${expected}: ${verdicts.length} entries.`);
  for (const v of failedExpectations) lines.push(`  FAILED ${v.entry}: ${v.reason}`);
  if (notRun.length > 0) lines.push(`  not part of this run: ${notRun.map((v) => v.entry).join(' ')}`);
  // The closing line is the verdict the exit status reports.
  lines.push(`expected: ${passedExpectations.length} passed, ${failedExpectations.length} failed`);
  return lines.join('\n') + '\n';
}

function wrap(words, width) {
  const lines = [];
  for (const word of words) {
    const last = lines.length - 1;
    if (last >= 0 && lines[last].length + 1 + word.length <= width) lines[last] += ` ${word}`;
    else lines.push(word);
  }
  return lines;
}

function clip(message) {
  const flat = String(message).replace(/\s+/g, ' ').trim();
  return flat.length > 200 ? `${flat.slice(0, 197)}...` : flat;
}
