'use strict';
// The benches' command-line options: `--name value`.

// --name N: a whole number, at least `min`, else the bench stops with a usage line.
function numberOption(name, fallback, min = 1) {
  const at = process.argv.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isInteger(value) || value < min) {
    console.error(`bench: --${name} takes a whole number of at least ${min}, not ` +
      `${process.argv[at + 1] ?? 'nothing'}`);
    process.exit(2);
  }
  return value;
}

// --name WORD: one of `choices` (the first by default), else the bench stops with a usage line.
function choiceOption(name, choices) {
  const at = process.argv.indexOf(`--${name}`);
  if (at < 0) return choices[0];
  const value = process.argv[at + 1];
  if (!choices.includes(value)) {
    console.error(`bench: --${name} takes one of ${choices.join(', ')}, not ${value ?? 'nothing'}`);
    process.exit(2);
  }
  return value;
}

module.exports = { numberOption, choiceOption };
