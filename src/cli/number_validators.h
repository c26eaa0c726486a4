// Command-line number checks whose messages say what was wanted. CLI11's PositiveNumber and
// NonNegativeNumber print their range up to the largest double ("Value 0 not in range 0.000000
// to 1797693...").
//
//   cmd->add_option("--hidden", hidden, "Width H")->check(ds2::cli::kPositive);
//   // ds2 bench rnn --hidden 0  ->  "--hidden: must be a positive number, got '0'"
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "core/parse_number.h"

namespace ds2::cli {

// A check that the option is a number for which ok(value) holds; else "must be <want>, got
// '<text>'".
inline CLI::Validator number_check(bool (*ok)(double), const std::string& want,
                                   const std::string& name) {
  return CLI::Validator(
      [ok, want](std::string& text) -> std::string {
        double v = 0.0;
        return parse_double(text, &v) && ok(v) ? "" : "must be " + want + ", got '" + text + "'";
      },
      name);
}

inline const CLI::Validator kPositive =
    number_check([](double v) { return v > 0.0; }, "a positive number", "POSITIVE");
inline const CLI::Validator kNonNegative =
    number_check([](double v) { return v >= 0.0; }, "zero or more", "NONNEGATIVE");

}  // namespace ds2::cli
