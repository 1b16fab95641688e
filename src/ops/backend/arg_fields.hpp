#pragma once
// An op's arguments as a list of 64-bit words, one per scalar field (pointers, sizes, flags,
// factors as their bits), nested structs field by field: what a captured launch fixes. The step
// trace compares them step after step; padding bytes, which memcmp would read, never enter.
// Fields are reached by structured bindings, so an argument struct stays a plain aggregate of
// scalars and aggregates (no arrays, no base classes) of at most 32 fields.
#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace mt::arg_fields {

// Converts to any field type: T{Any...} compiles for as many Any as T has fields.
struct Any {
  template <class U>
  operator U() const;  // NOLINT: only named in unevaluated contexts
};

template <class T, class... A>
constexpr int count_fields() {
  if constexpr (sizeof...(A) > 32) return -1;
  else if constexpr (requires { T{A{}..., Any{}}; }) return count_fields<T, A..., Any>();
  else return int(sizeof...(A));
}

template <class T>
void put(std::vector<uint64_t>& out, const T& v);

template <class... F>
void put_all(std::vector<uint64_t>& out, const F&... f) {
  (put(out, f), ...);
}

template <int N, class T>
void put_low(std::vector<uint64_t>& out, const T& a) {
  if constexpr (N == 1) {
    auto& [f0] = a;
    put_all(out, f0);
  } else if constexpr (N == 2) {
    auto& [f0, f1] = a;
    put_all(out, f0, f1);
  } else if constexpr (N == 3) {
    auto& [f0, f1, f2] = a;
    put_all(out, f0, f1, f2);
  } else if constexpr (N == 4) {
    auto& [f0, f1, f2, f3] = a;
    put_all(out, f0, f1, f2, f3);
  } else if constexpr (N == 5) {
    auto& [f0, f1, f2, f3, f4] = a;
    put_all(out, f0, f1, f2, f3, f4);
  } else if constexpr (N == 6) {
    auto& [f0, f1, f2, f3, f4, f5] = a;
    put_all(out, f0, f1, f2, f3, f4, f5);
  } else if constexpr (N == 7) {
    auto& [f0, f1, f2, f3, f4, f5, f6] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6);
  } else if constexpr (N == 8) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7);
  } else if constexpr (N == 9) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8);
  } else if constexpr (N == 10) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9);
  } else if constexpr (N == 11) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10);
  } else if constexpr (N == 12) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11);
  }
}

template <int N, class T>
void put_high(std::vector<uint64_t>& out, const T& a) {
  if constexpr (N == 13) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12);
  } else if constexpr (N == 14) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13);
  } else if constexpr (N == 15) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14);
  } else if constexpr (N == 16) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15);
  } else if constexpr (N == 17) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16);
  } else if constexpr (N == 18) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17);
  } else if constexpr (N == 19) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18);
  } else if constexpr (N == 20) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19);
  } else if constexpr (N == 21) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20);
  } else if constexpr (N == 22) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21] =
          a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20,
          f21);
  } else if constexpr (N == 23) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21,
          f22] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20,
          f21, f22);
  } else if constexpr (N == 24) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21,
          f22, f23] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20,
          f21, f22, f23);
  }
}

template <int N, class T>
void put_top(std::vector<uint64_t>& out, const T& a) {
  if constexpr (N == 25) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22,
          f23, f24] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21,
          f22, f23, f24);
  } else if constexpr (N == 26) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22,
          f23, f24, f25] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21,
          f22, f23, f24, f25);
  } else if constexpr (N == 27) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22,
          f23, f24, f25, f26] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21,
          f22, f23, f24, f25, f26);
  } else if constexpr (N == 28) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22,
          f23, f24, f25, f26, f27] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21,
          f22, f23, f24, f25, f26, f27);
  } else if constexpr (N == 29) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22,
          f23, f24, f25, f26, f27, f28] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21,
          f22, f23, f24, f25, f26, f27, f28);
  } else if constexpr (N == 30) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22,
          f23, f24, f25, f26, f27, f28, f29] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21,
          f22, f23, f24, f25, f26, f27, f28, f29);
  } else if constexpr (N == 31) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22,
          f23, f24, f25, f26, f27, f28, f29, f30] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21,
          f22, f23, f24, f25, f26, f27, f28, f29, f30);
  } else if constexpr (N == 32) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22,
          f23, f24, f25, f26, f27, f28, f29, f30, f31] = a;
    put_all(out, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21,
          f22, f23, f24, f25, f26, f27, f28, f29, f30, f31);
  }
}

template <class T>
void put_fields(std::vector<uint64_t>& out, const T& a) {
  constexpr int n = count_fields<T>();
  static_assert(n > 0, "an op's argument struct must be an aggregate of 1 to 32 fields");
  if constexpr (n <= 12) put_low<n>(out, a);
  else if constexpr (n <= 24) put_high<n>(out, a);
  else put_top<n>(out, a);
}

template <class T>
void put(std::vector<uint64_t>& out, const T& v) {
  if constexpr (std::is_pointer_v<T>) {
    out.push_back(uint64_t(reinterpret_cast<uintptr_t>(v)));
  } else if constexpr (std::is_enum_v<T>) {
    out.push_back(uint64_t(v));
  } else if constexpr (std::is_integral_v<T>) {
    out.push_back(uint64_t(v));
  } else if constexpr (std::is_same_v<T, float>) {
    out.push_back(std::bit_cast<uint32_t>(v));
  } else if constexpr (std::is_same_v<T, double>) {
    out.push_back(std::bit_cast<uint64_t>(v));
  } else {
    put_fields(out, v);
  }
}

}  // namespace mt::arg_fields

namespace mt {

// The words of `args`, in field order.
template <class T>
std::vector<uint64_t> arg_words(const T& args) {
  std::vector<uint64_t> out;
  arg_fields::put_fields(out, args);
  return out;
}

}  // namespace mt
