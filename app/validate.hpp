// `exasim validate`: runs every validation case the project carries (scenarios/validation/)
// and compares each figure with its published value.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "app/pipeline.hpp"

namespace exasim {
// Returns the rows: case, figure, predicted, published, error_pct, role, unit (+ reason).
nlohmann::json run_validation(const PredictOptions& o);
std::string validation_table(const nlohmann::json& rows);
}
