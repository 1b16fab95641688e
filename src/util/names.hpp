#pragma once
// Choices are parsed into enums once, at the config border; Names<E>::list gives each value's
// spelling in experiment files and on the command line (and the schema's list of valid values,
// in this order).
#include <string>
#include <utility>

namespace mt {

template <class E>
struct Names;

template <class E>
const char* name_of(E value) {
  for (const auto& [name, v] : Names<E>::list)
    if (v == value) return name;
  return "?";
}

// The value spelled `name`; false when none is.
template <class E>
bool value_of(const std::string& name, E& value) {
  for (const auto& [spelling, v] : Names<E>::list)
    if (name == spelling) {
      value = v;
      return true;
    }
  return false;
}

}  // namespace mt
