#include "common/shortest_double.h"

#include <clocale>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace xv {

namespace {

// snprintf/strtod follow LC_NUMERIC; xv never changes it from "C", but a host program might.
// Replace a locale decimal separator by '.' so the text is always JSON.
void NormaliseDecimalPoint(char* text) {
  const char* point = std::localeconv()->decimal_point;
  if (point == nullptr || std::strcmp(point, ".") == 0 || point[0] == '\0') return;
  for (char* c = text; *c != '\0'; ++c) {
    if (*c == point[0]) *c = '.';
  }
}

}  // namespace

std::string ShortestDoubleText(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  // Fewest significant digits that read back exactly, in "d.ddde[+-]XX" form.
  char buffer[48];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*e", digits - 1, value);
    NormaliseDecimalPoint(buffer);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  const std::string text(buffer);
  const bool negative = text[0] == '-';
  const size_t e = text.find('e');
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i) {
    if (text[i] != '.') digits.push_back(text[i]);
  }
  const int exponent = std::atoi(text.c_str() + e + 1);
  std::string out = negative ? "-" : "";
  const int n = static_cast<int>(digits.size());
  if (exponent >= -5 && exponent < 17) {
    // Positional: 0.000123, 15.0, 524288.0, 0.1.
    if (exponent < 0) {
      out += "0." + std::string(-exponent - 1, '0') + digits;
    } else if (exponent + 1 >= n) {
      out += digits + std::string(exponent + 1 - n, '0') + ".0";
    } else {
      out += digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
    return out;
  }
  // Scientific: 1e-10, 1.5e20.
  out += digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  return out + "e" + std::to_string(exponent);
}

}  // namespace xv
